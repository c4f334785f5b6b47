"""Any program as a workload: the plan's `workload.command`, one process per run.

The run's parameters replace `{name}` in the arguments; the rest arrives in the environment:

    ABLATE_RUN_ID          the run's id (its presence tells the helper it is under ablate)
    ABLATE_SEED            the run's seed
    ABLATE_STEPS           the run's length in steps (for LR schedules; a pilot stops earlier)
    ABLATE_UNTIL           the last step this process trains: a pilot's last, else the run's
    ABLATE_PHASE           `pilot` or `main`
    ABLATE_EVAL_EVERY      evaluate every this many steps, and at the last step it trains
    ABLATE_DEVICE          `cuda` or `cpu`; CUDA_VISIBLE_DEVICES shows only the slot's card
    ABLATE_CHECKPOINT_DIR  an empty folder: save the training state there when asked
    ABLATE_RESUME_DIR      on a resume only: the folder saved at ABLATE_RESUME_STEP, restored
    ABLATE_RESUME_STEP     the step to continue after (0: a fresh start)
    ABLATE_PREDICTIONS     where to write held-out predictions, optionally: CSV with the
                           header `input_id,label,predicted`, one integer row per input
                           (read once the program exits; the error analysis's flips)

The program prints one JSON object per line on stdout: `{"step": N, "loss": x, "metrics":
{...}}` reports a step; `{"steps": [N, ...], "losses": [x, ...], "metrics": {...}}` reports
several at once (the metrics the last one's; `losses` left out: none of them has a loss);
`{"saved": N}` says the checkpoint folder holds step N complete. A loss or metric that is NaN
or infinite may be written as the `NaN`/`Infinity`/`-Infinity` token, as a string (`"nan"`,
`"inf"`) or as `null` (what JavaScript's JSON.stringify writes): all are non-finite, and the
non-finite rule stops the run there; a step without a loss leaves `loss` out.
A message with `"reply": true` gets one JSON line back on stdin,
`{"checkpoint": bool, "stop": bool, "next": M}` (after `saved`: `{"ok": true}`, once the folder
is copied). A program may hold its reports back and send them together, and send some
without asking (a round trip per step costs more than a sub-millisecond step): what those
decide (checkpoint, stop) is answered at its next question, which must come within a fraction
of a second, and at step `M` (the last step it trains, or an interval checkpoint's: those are
exact). Any other line is the program's own output, passed through. A program that never asks
for replies is stopped by SIGTERM, and cannot be asked for checkpoints.

The program runs in a process group of its own (a Ctrl-C at the terminal reaches ablate, which
stops it through the protocol, not the program directly) and dies with the worker that started
it. A program silent for `workload.report_timeout_seconds` (default 600: hung, or blocked
reading its stdin for an answer it never asked for) has its group killed, and its run fails
with "no report for N s" (`NoReport`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from ablations.byo import run_variables
from ablations.byo.session import Reply, Session
from ablations.errors import NoReport, WorkloadError
from ablations.plan.section import PLACEHOLDER, ParamValue, shown
from ablations.process.parent_watch import PRCTL, die_with_parent
from ablations.process.preemption import TERMINATE
from ablations.process.scratch import scratch_folder
from ablations.process.threads import cpu_share
from ablations.run.records import RunSpec

log = logging.getLogger(__name__)

HELPER_DIR = Path(__file__).parent / "helper"
"""On the program's PYTHONPATH, so `import ablate_report` works (the helper's own folder,
holding nothing else)."""
STOP_GRACE_SECONDS = 30.0
"""After SIGTERM, how long a program may take to save and exit before it is killed."""
STDERR_TAIL = 20
"""Lines of the program's stderr kept for the error of a run whose program failed."""
WATCH_SECONDS = 0.25
"""How often the watch looks at the program's silence and at a terminate request: a timeout
fires at most this late."""


def command_line(command: list[str], params: Mapping[str, ParamValue]) -> list[str]:
    """The arguments with `{name}` replaced; a leading `python` is this interpreter (the
    worker's environment, where the plan's packages are installed)."""

    def value(match: Any) -> str:
        name = match.group(1)
        if name not in params:
            raise WorkloadError(f"command argument names {{{name}}}, no parameter of the run")
        return shown(params[name])

    argv = [PLACEHOLDER.sub(value, argument) for argument in command]
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv


def environment(spec: RunSpec, checkpoint: Path, resume: Path | None, step: int) -> dict[str, str]:
    """The program's environment: this process's, plus the run's `ABLATE_*` variables."""
    env = dict(os.environ)
    # `cuda:1` read as torch.device reads it: the program, not this process, loads torch.
    kind, _, index = spec.device.partition(":")
    if kind == "cuda":
        # The worker may already see only its card: index into what it sees.
        visible = env.get("CUDA_VISIBLE_DEVICES")
        cards = visible.split(",") if visible else [str(i) for i in range(64)]
        env["CUDA_VISIBLE_DEVICES"] = cards[int(index or 0)]
    else:
        env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU slot: never take a card from another slot
    if "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(cpu_share())  # the slot's share
    env["PYTHONUNBUFFERED"] = "1"  # a report printed is a report read, not one in a buffer
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = f"{HELPER_DIR}{os.pathsep}{path}" if path else str(HELPER_DIR)
    env.update(run_variables(spec))
    env.update(
        ABLATE_RUN_ID=spec.run_id,
        ABLATE_DEVICE=kind,
        ABLATE_CHECKPOINT_DIR=str(checkpoint),
        ABLATE_RESUME_STEP=str(step),
        ABLATE_PREDICTIONS=str(checkpoint.parent / "predictions.csv"),
    )
    env.pop("ABLATE_RESUME_DIR", None)
    if resume is not None:
        env["ABLATE_RESUME_DIR"] = str(resume)
    return env


class CommandWorkload:
    """The entry a plan's `workload.command` stands for (`COMMAND_ENTRY`)."""

    resume_fixes = {
        "nondeterministic": "seed every random source from ABLATE_SEED (ablate.seed()) and "
        "avoid non-deterministic kernels",
        "unknown": "save into ABLATE_CHECKPOINT_DIR, and load from ABLATE_RESUME_DIR, "
        "everything the next steps depend on: the model, the optimizer, the data position "
        "and the random generators (torch.get_rng_state(), numpy's, random's)",
    }
    """The restart check's fix for each cause it can find (`ablations.byo.restart`): a
    program's batches and state are its own, so the check names the possibilities."""

    @classmethod
    def run_external(cls, spec: RunSpec, session: Session) -> None:
        if not spec.workload.command:
            raise WorkloadError(f"run {spec.run_id} has no command")
        argv = command_line(spec.workload.command, spec.params)
        with scratch_folder(f"{spec.run_id[:40]}-") as scratch:
            checkpoint, resume = Path(scratch, "checkpoint"), Path(scratch, "resume")
            checkpoint.mkdir()
            step = session.restore(resume)
            env = environment(spec, checkpoint, resume if step else None, step)
            timeout = spec.workload.report_timeout
            _Conversation(argv, env, session, checkpoint, spec.workdir, timeout).run()
            # Read while the scratch folder exists; a run a stop rule or a SIGTERM ended
            # keeps no predictions (the program may have been ended writing them).
            predictions = Path(env["ABLATE_PREDICTIONS"])
            ended = session.stop is not None or session.interrupted_at is not None
            if predictions.is_file() and not ended:
                session.read_predictions(predictions)


class _Conversation:
    """One program's process: its reports read, the session's answers written back."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        session: Session,
        folder: Path,
        workdir: str | None,
        timeout: float,
    ):
        self.session, self.folder, self.timeout = session, folder, timeout
        if workdir is not None and not Path(workdir).is_dir():
            raise WorkloadError(
                f"cannot start {argv[0]!r} in {workdir}, the folder `ablate run` started in: "
                "it is not a folder on this host (on a work pool, every host needs the "
                "command's files at the same path)"
            )
        self.stderr: deque[str] = deque(maxlen=STDERR_TAIL)
        self.terminated = False
        self.silent_for: float | None = None
        """Set when the watch killed the program for its silence: the seconds it waited."""
        self.asks = False
        """It has asked for an answer (it can hear one: `ablate_report` batching its steps)."""
        self._heard = time.monotonic()
        """When the program's last report was answered (or it started)."""
        self._busy = False
        """A report is being handled: ablate's time (a commit) is not the program's silence."""
        self._ended = threading.Event()
        try:
            self.process = subprocess.Popen(
                argv,
                cwd=workdir,
                env=env,
                # The protocol's answers come on stdin: a pipe, written only when asked.
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                bufsize=1,
                # Its own session and group: a Ctrl-C at the terminal reaches ablate, which
                # ends the run through the protocol; a timeout kills all the program started.
                start_new_session=True,
                # Dies with this process (the slot's worker), kill -9 included: the watch
                # below is this process's, so a program must not outlive it.
                preexec_fn=_die_with_parent if PRCTL is not None else None,
            )
        except OSError as exc:
            raise WorkloadError(f"cannot start {argv[0]!r}: {exc}") from exc
        session.program_pid = self.process.pid
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        self._watch_thread = threading.Thread(target=self._watch, daemon=True)
        self._watch_thread.start()

    def run(self) -> None:
        process = self.process
        assert process.stdout is not None
        stopping = False
        """The program was answered `stop`."""
        held = Reply(checkpoint=False, stop=False)
        """What the reports sent without asking decided, for the next answer."""
        try:
            for line in process.stdout:
                message = _message(line)
                if message is None:
                    sys.stdout.write(line)  # the program's own output
                    continue
                self._busy = True
                if "saved" in message:
                    self.session.commit(int(message["saved"]), self.folder)
                    self._answer(message, {"ok": True})
                    self._heard, self._busy = time.monotonic(), False
                    continue
                if stopping:  # it trains on after being told to stop: end it
                    self._terminate()
                    break
                if self.session.stop is None:  # after a rule fired, later steps are moot
                    reply = self._report(message)
                    held = Reply(held.checkpoint or reply.checkpoint, held.stop or reply.stop)
                self.asks = self.asks or bool(message.get("reply"))
                if message.get("reply"):
                    answer = {"checkpoint": held.checkpoint, "stop": held.stop}
                    self._answer(message, {**answer, "next": self.session.next_due()})
                    stopping, held = held.stop, Reply(checkpoint=False, stop=False)
                elif held.stop and not self.asks:
                    self._terminate()  # it never asks: it cannot hear the answer
                    break
                self._heard, self._busy = time.monotonic(), False
            self._busy = False  # its output ended: the watch times its exit too
            code = process.wait(timeout=STOP_GRACE_SECONDS if stopping else None)
        except BaseException:
            self._kill()
            raise
        finally:
            self._ended.set()
            self._stderr_reader.join(timeout=5)
        if self.silent_for is not None:
            raise NoReport(
                f"no report for {self.silent_for:g} s (after step {self.session.step}; "
                "workload.report_timeout_seconds): the program was killed. Is it waiting on "
                "its stdin, or does its start or a step take longer? Raise the limit then"
            )
        if code != 0 and not self.terminated:
            tail = "".join(self.stderr).strip()
            raise WorkloadError(f"the command exited with {code}: {tail[-2000:]}")

    def _watch(self) -> None:
        """Kill the program once it has been silent for the timeout; SIGTERM it when this
        process is asked to terminate and it never asks for answers (it cannot hear `stop`,
        and a hung one would hold the worker to the end of its grace period)."""
        told = False
        while not self._ended.wait(WATCH_SECONDS):
            if TERMINATE.requested and not self.asks and not told:
                told = True
                if self.session.interrupted_at is None and self.session.stop is None:
                    self.session.interrupted_at = self.session.step
                self.terminated = True
                self._signal(signal.SIGTERM)
            silent = time.monotonic() - self._heard
            if not self._busy and silent > self.timeout and self.silent_for is None:
                self.silent_for = self.timeout
                self._signal(signal.SIGKILL)

    def _report(self, message: dict[str, Any]) -> Reply:
        """The session's reply to a report, or to steps reported together."""
        metrics = message.get("metrics")
        if metrics is not None and not isinstance(metrics, dict):
            raise WorkloadError(f"reported metrics {_json(metrics)} are not a JSON object")
        if metrics:
            metrics = {name: number(value, f"metric {name!r}") for name, value in metrics.items()}
        if "steps" in message:
            steps, losses = message["steps"], message.get("losses")
            if "losses" not in message:  # steps without a loss
                return self.session.report_batch(steps, [None] * len(steps), metrics)
            if not isinstance(losses, list):
                raise WorkloadError(f"reported losses {_json(losses)} are not a JSON list")
            values: list[float | None] = [number(loss, "loss") for loss in losses]
            return self.session.report_batch(steps, values, metrics)
        loss = number(message["loss"], "loss") if "loss" in message else None
        return self.session.report(int(message["step"]), loss, metrics)

    def _answer(self, message: dict[str, Any], answer: dict[str, bool | int]) -> None:
        if not message.get("reply"):
            return
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(json.dumps(answer) + "\n")
            stdin.flush()
        except BrokenPipeError:
            pass  # it exited after asking; its exit code says how

    def _terminate(self) -> None:
        self.terminated = True
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self._kill()

    def _kill(self) -> None:
        self._signal(signal.SIGKILL)
        self.process.wait()

    def _signal(self, sig: int) -> None:
        """Send `sig` to the program's whole group (what it started too). Only while the
        program is not reaped: until then its pid, the group's id, cannot be reused."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, sig)

    def _read_stderr(self) -> None:
        stream: IO[str] | None = self.process.stderr
        assert stream is not None
        for line in stream:
            self.stderr.append(line)
            sys.stderr.write(line)


def _die_with_parent() -> None:
    """In the program's process, before exec: SIGKILL when the worker dies."""
    die_with_parent(signal.SIGKILL)


def number(value: object, what: str) -> float:
    """A reported loss or metric as a float. JSON has no NaN or infinity: `NaN`, `Infinity`
    and `-Infinity` tokens (Python's json writes them), strings (`"nan"`, `"inf"`,
    `"-Infinity"`) and `null` (JavaScript's JSON.stringify writes NaN and infinities as
    `null`) are all read as non-finite, so a diverged run stops by the non-finite rule in any
    language. A value left out is no value (no loss at that step)."""
    if value is None:
        return math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise WorkloadError(
        f"reported {what} {_json(value)} is not a number (send a number; NaN or infinity as "
        'NaN, Infinity, "nan", "inf" or null)'
    )


def _json(value: object) -> str:
    """A reported value as the program wrote it, cut short."""
    text = json.dumps(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _message(line: str) -> dict[str, Any] | None:
    """A protocol message, or None for the program's own output."""
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        message = json.loads(text)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    if isinstance(message.get("step"), int) or isinstance(message.get("saved"), int):
        return message
    steps = message.get("steps")
    if isinstance(steps, list) and steps and all(isinstance(step, int) for step in steps):
        return message
    return None
