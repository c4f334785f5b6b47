"""A campaign at a size that uses the card: probe, then 1, 2 and 4 slots per device.

    python bench/gpu_size.py --out DIR                    # on a card (part of gpu_check.sh)
    python bench/gpu_size.py --out DIR --cpu --slots 1    # the same logic, tiny, on CPU

The charlm recipe at about 85M parameters (12 layers of 768, 512-byte context, batch 32, bf16
autocast), control + 3 factors of the same cost x 2 seeds: a pilot of the control, then 8 main
runs. `ablate probe` of the control first (its planned peak and step time); then one `ablate run`
per slot count (`slots_per_device: k` on `devices: auto`; on CPU, `devices: k` CPU slots), each
under its own time cap so one slow campaign cannot eat the others. While a campaign runs, the
card's utilisation and memory are sampled (NVML, else nvidia-smi; none on CPU). Per campaign,
from the completion records: main-phase runs per hour (runs / first start to last end),
tokens per second over all slots, median seconds per step, mean GPU utilisation over the main
phase, peak reserved memory per run against the probe's prediction. Then which k was fastest
and what `slots_per_device: auto` picks from the probe (`plan_slots`, as `ablate run` does),
and the probe's step time against the 1-slot campaign's.
Writes DIR/size.json and DIR/SIZE.md; prints the table. Exit 1 when no campaign finished.

Runs of 40 steps are short next to a real campaign's: the builds, evaluations and final saves
weigh more here than they would, which favours running several per card. The table says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

RECIPE = Path(__file__).resolve().parents[1] / "ablations" / "recipes" / "charlm.yaml"
CARD: dict[str, Any] = {"n_layer": 12, "n_embd": 768, "n_head": 12, "block_size": 512,
                        "batch_size": 32, "lr": 0.0006, "precision": "bf16",
                        "eval_bytes": 4096}  # fmt: skip
"""About 85M parameters: 16k tokens a step, tens of milliseconds on an H200."""
TINY: dict[str, Any] = {"n_layer": 1, "n_embd": 32, "n_head": 2, "block_size": 32,
                        "batch_size": 8, "eval_bytes": 1024}  # fmt: skip


def size_plan(slots: int, cpu: bool, steps: int) -> dict[str, Any]:
    """The recipe at the card's size (or tiny), with `slots` runs per device (CPU slots)."""
    data: dict[str, Any] = yaml.safe_load(RECIPE.read_text())
    data["campaign"]["id"] = f"charlm-size-{'cpu' if cpu else 'card'}-{slots}"
    data["workload"]["params"].update(TINY if cpu else CARD)
    data["workload"].update(steps=steps, eval_every=steps)
    data["control"] = {"params": {"dropout": 0.0, "weight_decay": 0.0}}
    data["factors"] = {  # the same cost each: the slot counts, not the variants, differ
        "dropout": {"category": "essential", "levels": [0.1]},
        "lr": {"category": "useful", "levels": [0.0003]},
        "weight_decay": {"category": "exploratory", "levels": [0.1]},
    }
    data["metric"]["threshold"] = 5.4  # ln(256) = 5.55: anything that learned at all
    data["stop_rules"] = {"quality": {"warmup_steps": steps}, "restart": {"enabled": False}}
    data["pilot"] = {"variants": ["control"], "seeds": [0], "steps": max(1, steps // 4)}
    data["probe"] = {"batch_sizes": [8], "steps": 4, "margin": 0.2}
    data["checkpoint"] = {"store": "file://checkpoints", "interval": {"steps": 10**6}}
    data["resources"] = (
        {"devices": slots} if cpu else {"devices": "auto", "slots_per_device": slots}
    )
    data["budget"] = {"package": {"gpu": "H200", "lots": 1, "days": 3, "price_usd": 600.0}}
    return data


class Sampler:
    """The card's utilisation (%) and memory used (bytes), every `period` seconds, in a thread:
    NVML when `pynvml` imports, else nvidia-smi, else nothing (`source` says which)."""

    def __init__(self, period: float = 0.5, index: int = 0) -> None:
        self.period, self.index = period, index
        self.samples: list[tuple[float, float, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.source = "none"
        self._read = self._nvml() or self._smi()

    def _nvml(self) -> Any:
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
        except Exception:
            return None
        self.source = "nvml"
        return lambda: (
            float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu),
            int(pynvml.nvmlDeviceGetMemoryInfo(handle).used),
        )

    def _smi(self) -> Any:
        smi = shutil.which("nvidia-smi")
        if smi is None:
            return None
        query = [smi, "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits",
                 f"-i={self.index}"]  # fmt: skip

        def read() -> tuple[float, int]:
            out = subprocess.run(query, capture_output=True, text=True, timeout=10).stdout
            util, used = out.strip().splitlines()[0].split(",")
            return float(util), int(float(used) * 2**20)

        self.source = "nvidia-smi"
        return read

    def __enter__(self) -> Sampler:
        if self._read is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            try:
                util, used = self._read()
            except Exception:
                continue  # a missed sample, not a failed campaign
            self.samples.append((time.time(), util, used))


def run_capped(command: list[str], cap: float, log: Path) -> tuple[int | None, float]:
    """Run `command` with its output to `log`; SIGTERM at `cap` seconds (a campaign commits
    and stops), SIGKILL 20 s later. (exit code or None when capped, wall seconds)."""
    started = time.perf_counter()
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            code: int | None = process.wait(timeout=max(1.0, cap))
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            code = None
    return code, time.perf_counter() - started


def campaign_figures(
    folder: Path, samples: list[tuple[float, float, int]], tokens_per_step: int
) -> dict[str, Any]:
    """What one campaign's records say about throughput and memory (see the module doc)."""
    records = [json.loads(p.read_text()) for p in sorted((folder / "records").glob("*.json"))]
    main = [r for r in records if r["phase"] == "main" and r.get("started_at")]
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    figures: dict[str, Any] = {"runs": len(records), "statuses": statuses, "main_runs": len(main)}
    if not main:
        return figures
    start = min(r["started_at"] for r in main)
    end = max(r["ended_at"] for r in main)
    span = max(end - start, 1e-9)
    trained = sum(r["steps_done"] - (r["checkpoint"].get("resumed_from_step") or 0) for r in main)
    peaks = [max((m["reserved"] for m in r.get("memory", {}).values()), default=0) for r in main]
    steps = [r["step_seconds"] for r in main if r.get("step_seconds")]
    during = [(u, m) for t, u, m in samples if start <= t <= end]
    figures.update(
        main_span_s=span,
        runs_per_hour=len(main) / span * 3600,
        tokens_per_s=trained * tokens_per_step / span,
        step_ms=statistics.median(steps) * 1e3 if steps else None,
        peak_reserved_per_run=max(peaks),
        slots=sorted({str(r.get("slot")) for r in main}),
        gpu_util_mean=statistics.fmean(u for u, _ in during) if during else None,
        card_used_max=max(m for _, m in during) if during else None,
        samples=len(during),
    )
    return figures


def auto_slots(plan_path: Path, probe_json: Path) -> int:
    """What `slots_per_device: auto` gives on this machine's first device, from the probe."""
    from ablations.plan.io import load_plan
    from ablations.probe.sweep import read
    from ablations.slots.devices import per_device, plan_slots

    plan = load_plan(plan_path)
    probe = read(probe_json)
    auto = plan.resources.model_copy(update={"slots_per_device": "auto"})
    device = plan_slots(auto, None, probe.planned_peak_bytes, plan.probe.margin)[0].device
    return per_device(auto, device, probe.planned_peak_bytes, plan.probe.margin)


def verdict(results: dict[int, dict[str, Any]], auto: int | None) -> str:
    """Which k was fastest (runs per hour) and whether `auto` picked it."""
    done = {k: f["runs_per_hour"] for k, f in results.items() if f.get("runs_per_hour")}
    if not done:
        return "no campaign finished: no fastest k"
    fastest = max(done, key=lambda k: done[k])
    said = f"fastest measured: {fastest} slot(s) per device ({done[fastest]:.0f} runs/h)"
    if auto is None:
        return said + "; auto: no probe result"
    if auto == fastest:
        return said + f"; slots_per_device auto picks {auto}: the fastest"
    if auto in done:
        loss = 1 - done[auto] / done[fastest]
        return said + f"; auto picks {auto}, NOT the fastest ({loss:.0%} fewer runs/h)"
    return said + f"; auto picks {auto}, which was not measured"


def shown(statuses: dict[str, int]) -> str:
    """`{"accepted": 8, "failed": 1}` as `8 accepted, 1 failed` (`-` for none)."""
    return ", ".join(f"{n} {status}" for status, n in statuses.items()) or "-"


def table(results: dict[int, dict[str, Any]], predicted: int | None) -> list[str]:
    """The Markdown table, one row per slot count."""
    head = ["| slots/device | campaign s | runs | main runs/h | tokens/s | ms/step | GPU util "
            "| peak/run (MiB) | vs probe | card max (MiB) |", "|" + " --- |" * 10]  # fmt: skip

    def num(value: Any, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    rows = []
    for k, f in sorted(results.items()):
        peak = f.get("peak_reserved_per_run")
        ratio = peak / predicted if peak and predicted else None
        util = f.get("gpu_util_mean")
        rows.append(
            f"| {k} | {num(f.get('wall_s'), '.0f')}{' (capped)' if f.get('capped') else ''} "
            f"| {shown(f.get('statuses', {}))} | {num(f.get('runs_per_hour'), '.0f')} "
            f"| {num(f.get('tokens_per_s'), '.0f')} | {num(f.get('step_ms'), '.1f')} "
            f"| {num(util, '.0f')}{'%' if util is not None else ''} "
            f"| {num(peak and peak / 2**20, '.0f')} | {num(ratio, '.2f')}x "
            f"| {num(f.get('card_used_max') and f['card_used_max'] / 2**20, '.0f')} |"
        )
    return head + rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cpu", action="store_true", help="tiny model, CPU slots")
    parser.add_argument("--slots", default="1,2,4", help="slot counts per device, in order")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--probe-cap", type=float, default=45)
    parser.add_argument("--campaign-cap", type=float, default=70)
    parser.add_argument("--budget", type=float, default=240, help="seconds for everything")
    args = parser.parse_args()
    started = time.monotonic()
    left = lambda: args.budget - (time.monotonic() - started)  # noqa: E731
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    ablate = [sys.executable, "-m", "ablations.cli"]
    counts = [int(k) for k in args.slots.split(",")]
    for k in counts:
        (out / f"plan-{k}.yaml").write_text(yaml.safe_dump(size_plan(k, args.cpu, args.steps)))
    params = TINY if args.cpu else CARD
    tokens_per_step = int(params["batch_size"]) * int(params["block_size"])
    first = out / f"plan-{counts[0]}.yaml"
    code, wall = run_capped(
        [*ablate, "probe", str(first), "--variants", "control", "--out", str(out / "probe")],
        min(args.probe_cap, left()), out / "probe.log",
    )  # fmt: skip
    probe_json = out / "probe" / "probe.json"
    predicted = auto = probe_step = None
    if probe_json.is_file():
        from ablations.probe.sweep import read

        probe = read(probe_json)
        predicted = probe.planned_peak_bytes
        probe_step = next((p.step_seconds for p in probe.points if p.ok and p.planned), None)
        auto = auto_slots(first, probe_json)
    print(f"probe: {'ok' if code == 0 else f'exit {code}'} in {wall:.0f} s; planned peak "
          f"{(predicted or 0) / 2**20:.0f} MiB; slots_per_device auto -> {auto}")  # fmt: skip
    results: dict[int, dict[str, Any]] = {}
    for k in counts:
        cap = min(args.campaign_cap, left())
        if cap < 15:
            print(f"{k} slot(s): NOT RUN, the {args.budget:.0f} s budget is spent")
            continue
        folder = out / f"campaign-{k}"
        with Sampler() as sampler:
            command = [*ablate, "run", str(out / f"plan-{k}.yaml"), "--out", str(folder)]
            code, wall = run_capped(command, cap, out / f"campaign-{k}.log")
        figures = (
            campaign_figures(folder, sampler.samples, tokens_per_step) if folder.exists() else {}
        )
        figures.update(exit=code, capped=code is None, wall_s=wall, sampler=sampler.source)
        results[k] = figures
        print(f"{k} slot(s): exit {code}, {wall:.0f} s, {shown(figures.get('statuses', {}))}, "
              f"{figures.get('runs_per_hour') or 0:.0f} main runs/h")  # fmt: skip
    said = verdict(results, auto)
    alone = results.get(1, {}).get("step_ms")
    stepped = (
        f"probe's planned step {probe_step * 1e3:.1f} ms; the 1-slot campaign's median "
        f"{alone:.1f} ms ({probe_step * 1e3 / alone - 1:+.1%})"
        if probe_step and alone
        else "probe's planned step against the 1-slot campaign's: not both measured"
    )
    lines = [
        f"# Size campaign ({'CPU, tiny' if args.cpu else 'card'}): charlm, {args.steps} steps",
        "", *table(results, predicted), "", said, stepped,
        f"probe's planned peak (reserved): {(predicted or 0) / 2**20:.0f} MiB; 'vs probe' is a "
        "run's peak over it. Runs this short weigh builds and saves more than a real "
        "campaign's, which favours several runs per card.",
    ]  # fmt: skip
    (out / "SIZE.md").write_text("\n".join(lines) + "\n")
    summary = {"steps": args.steps, "cpu": args.cpu, "predicted_peak": predicted,
               "probe_step_s": probe_step, "auto_slots": auto, "campaigns": results,
               "verdict": said}  # fmt: skip
    (out / "size.json").write_text(json.dumps(summary, indent=2, default=str))
    print("\n".join(lines[2:]))
    return 0 if any(f.get("exit") == 0 for f in results.values()) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
