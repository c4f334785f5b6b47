"""The data check: each failure by name with its offending ids, on real and built data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ablations.preflight.data_check import check_counts, check_data, check_splits
from ablations.run.workload import DataProblem, InputGroup, InputReport, Split, Splits
from ablations.workloads.digits import DigitsWorkload

DIGITS_COUNTS = {"train": 1433, "heldout": 364}


def digits() -> DigitsWorkload:
    return DigitsWorkload.build({}, seed=0, device=torch.device("cpu"), steps=10)


def split(ids: list[int], rows: list[list[float]], labels: list[int]) -> Split:
    return Split(np.array(ids), np.array(rows, dtype=np.float32), np.array(labels))


def clean() -> tuple[Split, Split]:
    train = split([0, 1, 2, 3], [[1, 0], [0, 1], [1, 1], [2, 0]], [0, 1, 0, 1])
    heldout = split([10, 11], [[3, 0], [0, 3]], [0, 1])
    return train, heldout


def by_check(problems: list[DataProblem]) -> dict[str, DataProblem]:
    return {p.check: p for p in problems}


def test_the_built_in_digits_data_passes_with_its_registered_counts() -> None:
    assert check_data(digits(), DIGITS_COUNTS) == []


def test_counts_that_differ_from_the_plan_are_reported() -> None:
    problems = check_data(digits(), {"train": 1437, "heldout": 364, "extra": 5})

    assert [str(p) for p in problems] == [
        "counts: train has 1433 inputs, the plan registers 1437",
        "counts: registered split 'extra' not found; have ['heldout', 'train']",
    ]


def test_clean_splits_have_no_problems() -> None:
    assert check_splits(Splits(*clean())) == []


def test_an_id_on_both_sides_is_reported_with_its_id() -> None:
    train, heldout = clean()
    heldout = split([10, 2], [[3, 0], [0, 3]], [0, 1])

    problem = by_check(check_splits(Splits(train, heldout)))["disjoint_ids"]
    assert problem.ids == [2]


def test_an_exact_copy_across_the_split_is_leakage() -> None:
    train, _ = clean()
    heldout = split([10, 11], [[3, 0], [1, 1]], [0, 1])  # 11 is a copy of train id 2

    problems = check_splits(Splits(train, heldout))
    assert [p.check for p in problems] == ["duplicate_content"]
    assert problems[0].ids == [11]
    assert "held-out=train: 11=2" in problems[0].message


def test_an_empty_side_and_an_empty_input_are_reported() -> None:
    train, heldout = clean()
    train = split([0, 1, 2, 3], [[1, 0], [0, 0], [1, 1], [2, 0]], [0, 1, 0, 1])
    problems = by_check(check_splits(Splits(train, heldout)))
    assert problems["empty_input"].ids == [1]

    nothing = Split(np.array([], dtype=int), np.zeros((0, 2)), np.array([], dtype=int))
    problems = by_check(check_splits(Splits(train, nothing)))
    assert "empty_split" in problems
    assert "the heldout side has no inputs" in problems["empty_split"].message


def test_a_class_missing_from_one_side_is_reported_with_its_inputs() -> None:
    train = split([0, 1, 2, 3], [[1, 0], [0, 1], [1, 1], [2, 0]], [0, 1, 2, 2])
    _, heldout = clean()

    problem = by_check(check_splits(Splits(train, heldout)))["class_coverage"]
    assert problem.message == "classes [2] are in train but not in heldout"
    assert problem.ids == [2, 3]


def test_repeated_ids_within_a_side_are_reported() -> None:
    train = split([0, 1, 1, 3], [[1, 0], [0, 1], [1, 1], [2, 0]], [0, 1, 0, 1])
    _, heldout = clean()

    assert by_check(check_splits(Splits(train, heldout)))["duplicate_ids"].ids == [1]


def test_every_problem_is_gathered_in_one_pass() -> None:
    train = split([0, 1, 2], [[0, 0], [0, 1], [1, 1]], [0, 1, 2])
    heldout = split([2, 11], [[3, 0], [0, 1]], [0, 1])

    checks = sorted(p.check for p in check_splits(Splits(train, heldout)))
    assert checks == ["class_coverage", "disjoint_ids", "duplicate_content", "empty_input"]


class OwnCheck:
    """A user's workload with its own data check and no splits()."""

    def check_data(self) -> list[DataProblem]:
        return [DataProblem("label_noise", "too many disagreeing annotators", [7])]

    def input_report(self) -> InputReport:
        return InputReport({"train": InputGroup(100), "heldout": InputGroup(20)})


def test_a_workloads_own_check_replaces_the_built_in_one_but_counts_still_apply() -> None:
    problems = check_data(OwnCheck(), {"train": 100, "heldout": 25})

    assert [str(p) for p in problems] == [
        "label_noise: too many disagreeing annotators ids [7]",
        "counts: heldout has 20 inputs, the plan registers 25",
    ]


def test_a_workload_without_any_data_access_is_not_silently_passed() -> None:
    class Opaque:
        def input_report(self) -> InputReport:
            return InputReport({})

    problems = check_data(Opaque(), None)
    assert [p.check for p in problems] == ["unchecked"]


@pytest.mark.parametrize("expected", [None, {}])
def test_no_registered_counts_means_no_count_check(expected: dict[str, int] | None) -> None:
    assert check_data(digits(), expected) == []
    assert check_counts({"train": 3}, {}) == []
