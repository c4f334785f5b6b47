"""The data check: an essential preflight step, run once before the pilot.

It looks for the faults that make every later number meaningless: the same input on both sides
of the split (by id, or as an exact copy under another id: leakage), an empty side or input, a
class missing from one side, and counts or a data digest that differ from what the plan
registered. Every
problem is gathered, named and given its offending ids, so one pass fixes them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ablations.run.workload import DataProblem, Split, Splits, data_digest_problem


def check_data(
    workload: Any, expected: Mapping[str, int] | None, data_sha256: str | None = None
) -> list[DataProblem]:
    """Every data problem of `workload`; its own `check_data()` replaces the built-in checks.

    The registered counts (`plan.workload.expected_inputs`) are checked either way: against
    `splits()` when the workload has it, else against its input report; so is the registered
    digest (`plan.workload.data_sha256`) against the workload's `data_sha256()`."""
    custom = getattr(workload, "check_data", None)
    splits_of = getattr(workload, "splits", None)
    splits = splits_of() if callable(splits_of) else None
    problems: list[DataProblem]
    if callable(custom):
        problems = list(custom())
    elif splits is not None:
        problems = check_splits(splits)
    else:
        problems = [
            DataProblem(
                "unchecked",
                "the workload has neither splits() nor check_data(), so leakage cannot be "
                "ruled out; add one of them",
            )
        ]
    if expected:
        if splits is not None:
            counts = {"train": len(splits.train.ids), "heldout": len(splits.heldout.ids)}
        else:
            counts = {name: g.seen for name, g in workload.input_report().groups.items()}
        problems += check_counts(counts, expected)
    digest = data_digest_problem(workload, data_sha256)
    if digest is not None:
        problems.append(digest)
    return problems


def check_splits(splits: Splits) -> list[DataProblem]:
    """The built-in checks on the training and held-out sides."""
    sides = {"train": splits.train, "heldout": splits.heldout}
    problems: list[DataProblem] = []
    for name, side in sides.items():
        problems += _check_side(name, side)
    train, heldout = splits.train, splits.heldout
    shared = sorted(set(_ints(train.ids)) & set(_ints(heldout.ids)))
    if shared:
        problems.append(DataProblem("disjoint_ids", f"{len(shared)} ids are on both sides", shared))
    problems += _duplicates_across(train, heldout)
    problems += _class_coverage(train, heldout)
    return problems


def check_counts(counts: Mapping[str, int], expected: Mapping[str, int]) -> list[DataProblem]:
    """Registered counts that the data does not have."""
    problems = []
    for name, want in expected.items():
        got = counts.get(name)
        if got is None:
            problems.append(
                DataProblem("counts", f"registered split {name!r} not found; have {sorted(counts)}")
            )
        elif got != want:
            problems.append(
                DataProblem("counts", f"{name} has {got} inputs, the plan registers {want}")
            )
    return problems


def _check_side(name: str, side: Split) -> list[DataProblem]:
    n = len(side.ids)
    if n == 0:
        return [DataProblem("empty_split", f"the {name} side has no inputs")]
    problems = []
    if len(side.inputs) != n or len(side.labels) != n:
        problems.append(
            DataProblem(
                "shape",
                f"{name} has {n} ids, {len(side.inputs)} inputs and {len(side.labels)} labels",
            )
        )
        return problems
    ids = _ints(side.ids)
    unique, counts = np.unique(np.asarray(ids), return_counts=True)
    repeated = unique[counts > 1].tolist()
    if repeated:
        problems.append(DataProblem("duplicate_ids", f"ids repeated within {name}", repeated))
    empty = [ids[i] for i in range(n) if _is_empty(side.inputs[i])]
    if empty:
        problems.append(
            DataProblem("empty_input", f"{len(empty)} {name} inputs have no content", empty)
        )
    return problems


def _is_empty(value: Any) -> bool:
    """No elements, or nothing but zeros, NaNs and empty strings (a blank image, a '' text)."""
    array = np.asarray(value)
    if array.size == 0:
        return True
    if array.dtype.kind in "fc":
        return bool(np.all((array == 0) | np.isnan(array)))
    if array.dtype.kind in "iub":
        return not array.any()
    return all(not item for item in array.ravel().tolist())


def _row_keys(inputs: np.ndarray) -> list[bytes]:
    """One exact key per input: its bytes (numeric) or its repr (text, objects)."""
    array = np.asarray(inputs)
    if array.dtype.kind in "biufc":
        rows = np.ascontiguousarray(array.reshape(len(array), -1))
        return [row.tobytes() for row in rows]
    return [repr(item).encode() for item in array]


def _duplicates_across(train: Split, heldout: Split) -> list[DataProblem]:
    """Held-out inputs identical to a training input under another id: leakage."""
    if len(train.ids) == 0 or len(heldout.ids) == 0:
        return []
    seen: dict[bytes, int] = {}
    for key, input_id in zip(_row_keys(train.inputs), _ints(train.ids), strict=False):
        seen.setdefault(key, input_id)
    pairs = [
        (input_id, seen[key])
        for key, input_id in zip(_row_keys(heldout.inputs), _ints(heldout.ids), strict=False)
        if key in seen
    ]
    if not pairs:
        return []
    shown = ", ".join(f"{h}={t}" for h, t in pairs[:5])
    return [
        DataProblem(
            "duplicate_content",
            f"{len(pairs)} held-out inputs are exact copies of training inputs "
            f"(held-out=train: {shown}{', ...' if len(pairs) > 5 else ''})",
            [h for h, _ in pairs],
        )
    ]


def _class_coverage(train: Split, heldout: Split) -> list[DataProblem]:
    """Every class on both sides: a class seen on one side only cannot be learned or judged."""
    problems = []
    splits = {"train": train, "heldout": heldout}
    labels = {side: np.asarray(split.labels) for side, split in splits.items()}
    ids = {side: np.asarray(_ints(split.ids)) for side, split in splits.items()}
    for side, other in (("train", "heldout"), ("heldout", "train")):
        missing = sorted(set(labels[side].tolist()) - set(labels[other].tolist()))
        if missing and len(labels[other]):
            offending = ids[side][np.isin(labels[side], missing)].tolist()
            problems.append(
                DataProblem(
                    "class_coverage",
                    f"classes {missing} are in {side} but not in {other}",
                    offending,
                )
            )
    return problems


def _ints(ids: Any) -> list[int]:
    return [int(i) for i in np.asarray(ids).tolist()]
