"""`ablate probe`: size the card before renting it, from a few steps of every variant.

Each variant's sweep runs in a slot's worker process (`probe_point.probe_variant`), one
variant after another on one device so no two points share its memory. The result says:

- every point: inputs completed, seconds per step, peak allocated and reserved memory per phase
  (build, train, evaluate, checkpoint), the error when one occurred;
- the largest safe batch per input group (the largest batch before the first failure, over
  every variant);
- the smallest memory class (24/32/48/80/141 GB) holding the peak reserved memory plus the
  plan's `probe.margin`. On CPU the peaks are the worker process's resident set (Python and
  torch included), labelled so;
- the runs' own step, evaluation and build times (`planned` points), which `ablate plan` and
  `ablate budget` then use instead of the plan's `budget.estimate` (source `probe`), and the
  peak that `resources.slots_per_device: auto` packs cards with.

Code that runs its own loop (`workload.command`, `lightning`, `hf_trainer`) is probed through
its adapter, one point per variant as planned (`ablations.byo.probe`): no batch size or input
group is swept, and the result says so (`ProbeResult.adapter`, `not_swept`) instead of a
largest safe batch. A command's memory is its own process's (peak RSS on CPU; on a GPU not
measured, so no card class and no `auto` packing come from it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import fmean
from typing import Literal

from pydantic import ValidationError

from ablations.errors import ProbeError, WorkloadError
from ablations.files.atomic import atomic_write_text
from ablations.files.names import PROBE_JSON, PROBE_MD
from ablations.plan.model import Plan, plan_hash
from ablations.plan.offers import RunEstimate
from ablations.plan.variants import Variant
from ablations.run.records import Record
from ablations.slots.devices import SlotSpec
from ablations.workers.probe_point import ProbePoint

MEMORY_CLASSES_GB = (24, 32, 48, 80, 141)
"""Card memory classes, in decimal GB as sold (an H200's 141 GB, an RTX 4090's 24 GB)."""


class ProbeResult(Record):
    """Everything `ablate probe` measured, as written to `probe.json`."""

    campaign_id: str
    plan_hash: str
    device: str
    device_name: str
    memory_source: Literal[
        "cuda allocator", "process RSS (CPU)", "program RSS (CPU)", "not measured"
    ]
    """Where the peaks come from: the worker's CUDA allocator or resident set; a command's
    own process (`program`); or nowhere (a command on a GPU: its card memory is its own)."""
    margin: float
    steps: int
    points: list[ProbePoint]
    seconds: float = 0.0
    """Wall seconds the probe took (worker start included)."""

    @property
    def adapter(self) -> str | None:
        """The adapter that ran the points (`command`, `lightning`, `hf_trainer`, an external
        entry), None for a built-in workload's sweep."""
        return next((p.adapter for p in self.points if p.adapter is not None), None)

    @property
    def memory_measured(self) -> bool:
        """Whether the peaks are measurements (a command on a GPU has none)."""
        if self.memory_source == "not measured":
            return False
        return self.adapter is None or self.peak_bytes > 0

    @property
    def stops(self) -> list[ProbePoint]:
        """The failed points: each ended its group's sweep."""
        return [p for p in self.points if not p.ok]

    @property
    def peak_bytes(self) -> int:
        """Peak reserved memory over every point that ran."""
        return max((p.peak_reserved for p in self.points if p.ok), default=0)

    @property
    def planned_peak_bytes(self) -> int:
        """Peak reserved memory of the runs as planned (their group and batch size)."""
        planned = [p.peak_reserved for p in self.points if p.ok and p.planned]
        return max(planned, default=self.peak_bytes)

    def largest_safe_batch(self) -> dict[str, int | None]:
        """Per group: the largest batch every variant ran (None: the smallest failed); empty
        when nothing was swept (an adapter's points)."""
        safe: dict[str, int | None] = {}
        if self.adapter is not None:
            return safe
        for variant in dict.fromkeys(p.variant for p in self.points):
            for group in dict.fromkeys(p.group for p in self.points if p.variant == variant):
                ran = [
                    p.batch_size
                    for p in self.points
                    if p.variant == variant and p.group == group and p.ok
                ]
                largest = max(ran, default=None)
                if group not in safe:
                    safe[group] = largest
                elif safe[group] is not None:
                    safe[group] = None if largest is None else min(safe[group] or 0, largest)
        return safe

    def memory_class(self) -> int | None:
        """The smallest class (GB) holding the peak with the margin; None: none does, or the
        memory was not measured."""
        if not self.memory_measured:
            return None
        need = self.peak_bytes * (1 + self.margin)
        return next((gb for gb in MEMORY_CLASSES_GB if gb * 1e9 >= need), None)

    def estimate(self, fallback: RunEstimate) -> RunEstimate:
        """The plan's estimate with the probed step, evaluation and build times in it."""
        planned = [p for p in self.points if p.ok and p.planned and p.step_seconds is not None]
        if not planned:
            return fallback
        return fallback.model_copy(
            update={
                "step_seconds": fmean(p.step_seconds or 0.0 for p in planned),
                "eval_seconds": fmean(p.eval_seconds or 0.0 for p in planned),
                "load_seconds": fmean(p.build_seconds or 0.0 for p in planned),
            }
        )


def run_probe(
    plan: Plan,
    slot: SlotSpec,
    chosen: Sequence[Variant],
    say: Callable[[str], None] = print,
) -> ProbeResult:
    """Probe each of `chosen` in one worker process on `slot`, one variant at a time."""
    from ablations.run.records import RunSpec
    from ablations.slots.locks import SlotLocks
    from ablations.workers.jobs import ProbeJob
    from ablations.workers.worker import SlotWorker, Warmup

    started = time.perf_counter()
    digest = plan_hash(plan)
    worker = SlotWorker(slot, Warmup(workload_imports=tuple(plan.workload.named_imports)))
    locks = SlotLocks.from_env()  # a campaign's runs on the slot would skew the peaks measured
    points: list[ProbePoint] = []
    device_name = slot.device
    try:
        problem = worker.workload_problem()
        if problem is not None:
            raise WorkloadError(f"the workload does not import: {problem}")
        for variant in chosen:
            spec = RunSpec.of(
                plan,
                digest,
                run_id=f"probe-{variant.name}",
                variant=variant.name,
                category=variant.category,
                phase="pilot",
                seed=plan.seed_list[0],
                params=variant.params,
                steps=plan.workload.steps,
                checkpoint=None,
            )
            job = ProbeJob(spec, list(plan.probe.batch_sizes), plan.probe.steps)
            with locks.held(slot):  # each variant's sweep, not the whole probe
                found, device_name = worker.do(job)
            for point in found:
                say(row(point))
            points += found
    finally:
        worker.close()
    cuda = slot.device.startswith("cuda")
    source: Literal["cuda allocator", "process RSS (CPU)", "program RSS (CPU)", "not measured"]
    if plan.workload.command is not None:  # the program's own process, not the worker's
        source = "not measured" if cuda else "program RSS (CPU)"
    else:
        source = "cuda allocator" if cuda else "process RSS (CPU)"
    return ProbeResult(
        campaign_id=plan.campaign.id,
        plan_hash=digest,
        device=slot.device,
        device_name=device_name,
        memory_source=source,
        margin=plan.probe.margin,
        steps=plan.probe.steps,
        points=points,
        seconds=time.perf_counter() - started,
    )


def _mb(value: int) -> str:
    return f"{value / 2**20:.0f}"


HEADER = "variant  group  batch  inputs  s/step  peak MB (build/train/eval/ckpt, reserved)  note"


def cells(p: ProbePoint) -> list[str]:
    """One point's cells, in `HEADER`'s order."""
    peaks = "/".join(
        _mb(p.memory[k].reserved) if k in p.memory else "-"
        for k in ("build", "train", "evaluate", "checkpoint")
    )
    step = f"{p.step_seconds:.4f}" if p.step_seconds is not None else "-"
    batch = str(p.batch_size) if p.batch_size or p.adapter is None else "-"
    if p.error is not None:
        kind = "OUT OF MEMORY" if p.out_of_memory else "ERROR"
        note = f"{kind} in {p.failed_phase}: {p.error.type}: {p.error.message[:120]}"
        note += " (stopped)" if p.adapter is None else ""
    else:
        note = "planned" if p.planned else ""
        if p.adapter is not None:
            where = f"workload.{p.adapter}" if p.adapter in ADAPTERS else p.adapter
            note = f"planned, through {where} (not swept)"
    inputs = str(p.inputs) if p.inputs or p.adapter is None else "-"
    return [p.variant, p.group, batch, inputs, step, peaks, note]


def row(p: ProbePoint) -> str:
    """One point as a terminal table row."""
    return "  ".join(cells(p)).rstrip()


def summary_lines(result: ProbeResult) -> list[str]:
    """The verdict under the table: stops, largest safe batches, the card class, the times."""
    lines = [
        f"device {result.device} ({result.device_name}); memory: {result.memory_source}; "
        f"probe took {result.seconds:.1f} s"
    ]
    for p in result.stops:
        if p.adapter is not None:  # one point as planned: no sweep to stop
            lines.append(
                f"failed: {p.variant} in {p.failed_phase}: "
                f"{p.error.type if p.error else ''}: {p.error.message[:200] if p.error else ''}"
            )
            continue
        lines.append(
            f"stopped: {p.variant} / {p.group} at batch {p.batch_size}: "
            f"{p.error.type if p.error else ''} in {p.failed_phase}; larger batches not tried"
        )
    if result.adapter is not None:
        lines += not_swept(result)
    else:
        safe = result.largest_safe_batch()
        lines.append(
            "largest safe batch: "
            + ", ".join(f"{g} {'none' if b is None else b}" for g, b in safe.items())
        )
    card = result.memory_class()
    need = result.peak_bytes * (1 + result.margin)
    cpu = "CPU" in result.memory_source
    if result.memory_source == "not measured":
        lines.append(
            "memory not measured: a command's card memory is its own process's, which ablate "
            "does not see; no card class (and `slots_per_device: auto` keeps 1 slot a card)"
        )
    elif not result.memory_measured:
        lines.append("memory not measured: no point reported a peak; no card class")
    else:
        lines.append(
            f"peak {_mb(result.peak_bytes)} MB x (1 + {result.margin:g}) = {need / 1e9:.2f} GB: "
            + (f"a {card} GB card holds it" if card else "larger than every class (141 GB)")
            + (" (CPU process memory: a proxy, not a card's)" if cpu else "")
        )
    planned = [p for p in result.points if p.ok and p.planned and p.step_seconds is not None]
    if planned:
        mean = fmean(p.step_seconds or 0.0 for p in planned)
        lines.append(f"runs as planned: {mean:.4f} s/step (used by `ablate plan` and `budget`)")
    else:
        lines.append("no planned point ran: `ablate plan` keeps the plan's estimate")
    return lines


ADAPTERS = {"command": "the program", "lightning": "Lightning", "hf_trainer": "the Trainer"}
"""The adapters' plan fields, and who owns the loop under each."""


def not_swept(result: ProbeResult) -> list[str]:
    """What an adapter's probe could not vary or measure, said instead of a safe batch."""
    adapter = result.adapter or ""
    where = f"workload.{adapter}" if adapter in ADAPTERS else adapter
    owner = ADAPTERS.get(adapter, "the workload")
    lines = [
        f"not swept: {where} runs its own loop and builds its own loader, so ablate cannot "
        "set its batch size or input length: probe.batch_sizes and input groups are ignored, "
        "each variant ran once as planned (batch = its `batch_size` parameter, `-` without "
        "one); no largest safe batch",
        f"times: a pilot of {result.steps} steps through {owner}'s loop: build is up to the "
        "first step's report, that step included; s/step the mean of the steps after it; "
        "the checkpoint is the framework's save of the last step and its commit",
    ]
    if adapter == "command":
        lines.append(
            "evaluation: the program reports after evaluating, so its time is the last "
            "step's less a mean step; memory: the program's own process (peak RSS), not the "
            "worker's"
        )
    return lines


def markdown(result: ProbeResult) -> str:
    """PROBE.md: the table and the verdict."""
    head = HEADER.split("  ")
    out = [f"# Probe of {result.campaign_id}", "", f"plan `{result.plan_hash}`", ""]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(c.replace("|", "/") for c in cells(p)) + " |" for p in result.points]
    return "\n".join([*out, "", *(f"- {line}" for line in summary_lines(result)), ""])


def write(result: ProbeResult, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    # Atomic: plan, budget and run read probe.json beside the plan; never half of one.
    atomic_write_text(out_dir / PROBE_JSON, result.model_dump_json(indent=2))
    atomic_write_text(out_dir / PROBE_MD, markdown(result))


def read(path: Path) -> ProbeResult:
    """A `probe.json`; a clear `ProbeError` when it is missing or not a probe result."""
    try:
        return ProbeResult.model_validate_json(path.read_text())
    except OSError as exc:
        raise ProbeError(f"probe result {str(path)!r}: {exc.strerror or exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "the top level"
        raise ProbeError(
            f"probe result {str(path)!r} is not an `ablate probe` probe.json: "
            f"{where}: {first['msg']}"
        ) from None


def for_plan(plan: Plan, plan_path: Path | None, given: Path | None = None) -> ProbeResult | None:
    """The probe result a plan uses: `given`, else `probe.result`, else `probe.json` beside the
    plan file when it exists. It must be of the same campaign."""
    path = given
    if path is None and plan_path is not None:
        folder = plan_path.parent
        if plan.probe.result is not None:
            path = folder / plan.probe.result
        elif (folder / PROBE_JSON).is_file():
            path = folder / PROBE_JSON
    if path is None:
        return None
    result = read(path)
    if result.campaign_id != plan.campaign.id:
        raise ProbeError(
            f"probe result {str(path)!r} is of campaign {result.campaign_id!r}, "
            f"not {plan.campaign.id!r}: probe this plan (`ablate probe`)"
        )
    return result


def dumps(result: ProbeResult) -> str:
    """The `--json` output: the result plus its verdict."""
    payload = json.loads(result.model_dump_json())
    payload["largest_safe_batch"] = result.largest_safe_batch()
    payload["peak_bytes"] = result.peak_bytes
    payload["memory_class_gb"] = result.memory_class()
    return json.dumps(payload, indent=2)


def peak_for_slots(plan: Plan, plan_path: Path | None) -> int | None:
    """The probed peak (bytes) that `slots_per_device: auto` packs cards with; None when
    the plan does not ask for it or has no probe result."""
    if plan.resources.slots_per_device != "auto":
        return None
    result = for_plan(plan, plan_path)
    if result is None or not result.memory_measured:
        return None
    return result.planned_peak_bytes
