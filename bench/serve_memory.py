"""`ablate serve`'s memory under plan bombs pasted into the UI's form (issue 43).

    .venv/bin/python bench/serve_memory.py [--check] [--bound-mb 700]

Starts a temporary Prefect server (`flows/local_server.py`, as `ablate run` does) and `ablate
serve --root ROOT` against it, then starts the deployment once per bomb below with the bomb as
`plan_yaml` (what the UI's form sends), waits for each flow run's final state, and samples the
resident memory of the serve process and of every process under it (the flow run's own
process included) every 20 ms. Printed per bomb: the input's size, the flow run's state and the
first words of its message, the serve process's peak RSS and the whole tree's peak (the sum
over its processes at one sample). The bombs are the issue's: a 100 KB scalar aliased 100 000
times, a 900 KB one aliased 1 000 times, nested aliases (a billion laughs), `steps:` of 10 000
digits, `keep_last: 1e9` and `width: 1e8`, and a plan of 8 MB. The Prefect API itself refuses a
flow run whose parameters exceed 512 KB serialized (422, no flow run, nothing reaches serve):
the 900 KB and 8 MB bombs are refused there, the others reach the flow run.

`--check` exits 1 when a bomb's flow run did not fail, when the serve process grew more than
`SERVE_GROWTH_MB` over its idle RSS, or when the tree's peak exceeds `--bound-mb` (the bounds
docs/performance.md states): the measured peaks are the idle serve process plus one flow run's
interpreter, whatever the bomb.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_SECONDS = 0.02
DEPLOYMENT = "ablation-campaign/bench"
DEFAULT_BOUND_MB = 600
"""The tree's peak RSS a bomb may cause (docs/performance.md): measured 397 MB on 2 cores (the
serve process 191 MB idle, 200 at most, and one flow run's interpreter); the issue saw the
serve process alone grow from 184 to 5 066 MB."""
SERVE_GROWTH_MB = 15
"""How far above its idle RSS the serve process itself may go while a bomb is handled."""
API_LIMIT_BYTES = 512 * 1024
"""Prefect's own cap on a flow run's serialized parameters: a bigger form is refused (422)."""


def _plan_head() -> str:
    return (
        "campaign: {id: bomb, question: q, decision: d}\n"
        "control: {params: {width: 32}}\n"
        "factors: {width: {category: essential, levels: [8]}}\n"
        "seeds: [0, 1]\n"
        "metric: {threshold: 0.5, useful_effect: 0.01}\n"
    )


def bombs() -> dict[str, str]:
    """Each bomb's name and the plan text pasted into the form."""
    scalar = "x" * 100_000
    aliases = ", ".join(["*a"] * 100_000)
    laughs = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, 10):
        laughs.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]")
    return {
        "alias 100 KB x 100 000": f"{_plan_head()}note: &a {scalar}\nmany: [{aliases}]\n",
        "alias 400 KB x 1 000": (
            f"{_plan_head()}note: &a {'w' * 400_000}\nmany: [{', '.join(['*a'] * 1_000)}]\n"
        ),
        "alias 900 KB x 1 000": (
            f"{_plan_head()}note: &a {'y' * 900_000}\nmany: [{', '.join(['*a'] * 1_000)}]\n"
        ),
        "billion laughs": f"{_plan_head()}" + "\n".join(laughs) + "\n",
        "steps: 10 000 digits": f"{_plan_head()}workload: {{steps: {'9' * 10_000}}}\n",
        "keep_last 1e9, width 1e8": (
            _plan_head().replace("width: 32", "width: 100000000")
            + "checkpoint: {store: 'memory://b', keep_last: 1000000000}\n"
        ),
        "8 MB plan": f"{_plan_head()}note: {'z' * (8 << 20)}\n",
    }


@dataclass
class Peak:
    """The largest RSS seen while one bomb was handled."""

    serve: int = 0
    tree: int = 0
    processes: int = 0


@dataclass
class Sampler:
    """Samples the RSS of `pid` and its descendants in a thread; `peak` since the last reset."""

    pid: int
    peak: Peak = field(default_factory=Peak)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def reset(self) -> Peak:
        peak, self.peak = self.peak, Peak()
        return peak

    def _run(self) -> None:
        import psutil

        root = psutil.Process(self.pid)
        while not self._stop.wait(SAMPLE_SECONDS):
            try:
                tree = [root, *root.children(recursive=True)]
                rss = []
                for process in tree:
                    try:
                        rss.append(process.memory_info().rss)
                    except psutil.Error:
                        continue
            except psutil.Error:
                return
            peak = self.peak
            peak.serve = max(peak.serve, rss[0] if rss else 0)
            peak.tree = max(peak.tree, sum(rss))
            peak.processes = max(peak.processes, len(rss))


def _wait_for_deployment(env: dict[str, str], timeout_s: float) -> None:
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with get_client(sync_client=True) as client:
                client.read_deployment_by_name(DEPLOYMENT)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _start(text: str, out_dir: Path) -> tuple[str, str]:
    """Start the deployment with `text` pasted, wait for its end: (state name, message);
    ("Refused", why) when the Prefect API refuses the parameters before any flow run."""
    from prefect.deployments import run_deployment
    from prefect.exceptions import PrefectHTTPStatusError

    try:
        flow_run = run_deployment(
            DEPLOYMENT, parameters={"plan_yaml": text, "out_dir": str(out_dir)}, timeout=600
        )
    except PrefectHTTPStatusError as exc:  # its text quotes the whole parameter: not shown
        status = exc.response.status_code
        detail = str(exc.response.json().get("exception_detail", [{}])[0].get("msg", ""))
        return "Refused", f"by the Prefect API ({status}): {detail[:120]}"
    state = flow_run.state
    assert state is not None
    return state.name, " ".join((state.message or "").split())


def mb(size: int) -> str:
    return f"{size / 2**20:,.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 above the bound")
    parser.add_argument("--bound-mb", type=float, default=DEFAULT_BOUND_MB)
    args = parser.parse_args()

    from flows.local_server import TemporaryServer

    scratch = Path(tempfile.mkdtemp(prefix="serve-memory-"))
    home, root = scratch / "prefect-home", scratch / "root"
    root.mkdir()
    os.environ["PREFECT_HOME"] = str(home)
    server = TemporaryServer()
    serve: subprocess.Popen[bytes] | None = None
    failures = []
    try:
        api = server.wait_ready(120)
        os.environ["PREFECT_API_URL"] = api
        env = dict(os.environ)
        ablate = str(Path(sys.executable).with_name("ablate"))
        log = (scratch / "serve.log").open("wb")
        serve = subprocess.Popen(
            [ablate, "serve", "--name", "bench", "--root", str(root)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        _wait_for_deployment(env, 180)
        sampler = Sampler(serve.pid)
        sampler.start()
        time.sleep(2)
        idle = sampler.reset()
        print(f"load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores")
        print(f"idle: serve {mb(idle.serve)} MB, tree {mb(idle.tree)} MB")
        print(f"{'bomb':28} {'input':>9} {'serve MB':>9} {'tree MB':>8} {'s':>5}  state: message")
        for number, (name, text) in enumerate(bombs().items()):
            started = time.monotonic()
            state, message = _start(text, root / f"out-{number}")
            time.sleep(0.3)  # the flow run's process ends; its last samples are in
            peak = sampler.reset()
            seconds = time.monotonic() - started
            size = f"{len(text.encode()) / 1024:,.0f} KB"
            print(
                f"{name:28} {size:>9} {mb(peak.serve):>9} {mb(peak.tree):>8} {seconds:5.1f}"
                f"  {state}: {message[:90]}"
            )
            if state not in ("Failed", "Refused"):
                failures.append(f"{name}: the flow run ended {state}, not refused")
            if peak.serve - idle.serve > SERVE_GROWTH_MB * 2**20:
                failures.append(f"{name}: serve grew {mb(peak.serve - idle.serve)} MB")
            if peak.tree > args.bound_mb * 2**20:
                failures.append(f"{name}: tree peak {mb(peak.tree)} MB > {args.bound_mb:g} MB")
        sampler.stop()
    finally:
        if serve is not None:
            serve.terminate()
            try:
                serve.wait(timeout=30)
            except subprocess.TimeoutExpired:
                serve.kill()
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    for line in failures:
        print(f"FAIL {line}")
    return 1 if args.check and failures else 0


if __name__ == "__main__":
    sys.exit(main())
