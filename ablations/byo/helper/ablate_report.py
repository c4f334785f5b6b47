"""Report to an ablate campaign from any Python training script: standard library only.

    import ablate_report as ablate                      # on PYTHONPATH when ablate runs you

    for step in range(ablate.resumed_step() + 1, ablate.steps() + 1):
        loss = train_one_step()
        evaluated = step % ablate.eval_every() == 0 or step == ablate.until()
        reply = ablate.report(step, loss, **({"accuracy": acc} if evaluated else {}))
        if reply.checkpoint:                            # save into ablate.checkpoint_dir()
            save_state(ablate.checkpoint_dir())
            ablate.saved(step)
        if reply.stop:
            break

Each call prints one JSON line on stdout and, for `report`, reads the campaign's one-line
answer from stdin; short steps are sent a few at a time and asked about once every
`BATCH_SECONDS`, besides those the campaign must hear at once. Run without ablate (no
`ABLATE_RUN_ID`), every call is a no-op that asks for nothing, so the same script runs bare.
The protocol, for other languages: docs/own-code.md, "Any language: the protocol".
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

_terminating = False


class Reply(NamedTuple):
    """What the campaign asks after a report."""

    checkpoint: bool
    """Save your state into `checkpoint_dir()` now, then call `saved(step)`."""
    stop: bool
    """Stop training: a stop rule fired, the step budget is reached, or the run is ending."""


def active() -> bool:
    """Whether an ablate campaign runs this process."""
    return "ABLATE_RUN_ID" in os.environ


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def seed(default: int = 0) -> int:
    """The run's seed (seed your RNGs with it); `default` when run bare."""
    return _int("ABLATE_SEED", default)


def steps(default: int = 0) -> int:
    """The run's length in steps (for LR schedules; a pilot is told to stop earlier);
    `default` when run bare."""
    return _int("ABLATE_STEPS", default)


def until(default: int = 0) -> int:
    """The last step this process trains: a pilot's last step (evaluate there too: the gate
    reads that evaluation), else `steps()`; `default` when run bare."""
    return _int("ABLATE_UNTIL", default)


def phase(default: str = "main") -> str:
    """`pilot` while this process trains a pilot (the first `until()` steps of the run, whose
    main run continues from its checkpoint), else `main`; `default` when run bare."""
    return os.environ.get("ABLATE_PHASE", default)


def eval_every(default: int = 0) -> int:
    """Evaluate every this many steps, and at the last step this process trains (`until()`);
    `default` when run bare."""
    return _int("ABLATE_EVAL_EVERY", default)


def checkpoint_dir() -> Path:
    """The empty folder to save your state into when asked."""
    return Path(os.environ.get("ABLATE_CHECKPOINT_DIR", "checkpoint"))


def resume_dir() -> Path | None:
    """The folder you saved at `resumed_step()`, restored; None on a fresh start."""
    folder = os.environ.get("ABLATE_RESUME_DIR")
    return Path(folder) if folder else None


def resumed_step() -> int:
    """The step the restored folder was saved at (0: start from scratch)."""
    return _int("ABLATE_RESUME_STEP", 0)


def predictions_file() -> Path | None:
    """Where to write held-out predictions (CSV `input_id,label,predicted`), optional."""
    path = os.environ.get("ABLATE_PREDICTIONS")
    return Path(path) if path else None


def write_predictions(ids: Any, labels: Any, predicted: Any) -> None:
    """Write the held-out predictions (integer input ids, labels and predicted classes, one
    of each per input) to `predictions_file()`, whole or not at all; a no-op when run bare.
    Write them at the run's last evaluation: the report's error analysis pairs each
    variant's with the control's of the same seed (the inputs that flipped)."""
    path = predictions_file()
    if path is None:
        return
    ids, labels, predicted = list(ids), list(labels), list(predicted)
    if not len(ids) == len(labels) == len(predicted):
        raise ValueError("write_predictions: ids, labels and predicted differ in length")
    rows = zip(ids, labels, predicted)  # noqa: B905 (no strict=: any Python 3 runs this)
    text = "".join(f"{int(i)},{int(y)},{int(p)}\n" for i, y, p in rows)
    text = "input_id,label,predicted\n" + text
    _write_whole(path, text.encode("utf-8"))


def _write_whole(path: Path, data: bytes) -> None:
    """`data` at `path`, whole or not at all, as the campaign's own atomic writer does it
    (`ablations/files/atomic.py`: this module imports nothing of ablate, so it runs bare): a
    new temporary beside it, synced, renamed into place, the folder synced; the file's mode a
    plain open()'s (0o666 less the umask). A reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:  # the rename lives in the folder's entry: sync it too (not possible on Windows)
        folder = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _answer() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:  # the campaign is gone: nothing to report to, nothing worth training for
        raise SystemExit("ablate_report: the campaign closed the connection")
    answer: dict[str, Any] = json.loads(line)
    return answer


BATCH_SECONDS = 0.05
"""Reports are sent together, and the campaign asked for its answer, at most this often: on
steps of a millisecond or less, one round trip per step would cost more than the step (and on
a busy machine, each round trip waits for the campaign's process to be scheduled). The first
step, the campaign's `next` step (the last this process trains, an interval checkpoint's) and
any step after a SIGTERM are asked about at once; an evaluation is sent at once, unasked (the
stop rules see it; their answer comes with the next question, the run ending at the step it
names)."""
_held: list[tuple[int, float | None]] = []
"""Steps reported but not sent yet: (step, loss)."""
_next = 0
"""The step the campaign's last answer asked to hear at once (0: every step)."""
_asked_at = 0.0


def report(step: int, loss: float | None = None, **metrics: float) -> Reply:
    """Report step `step` (its training loss, and held-out metrics when it evaluated)."""
    global _next, _asked_at
    if not active():
        return Reply(checkpoint=False, stop=False)
    _held.append((int(step), None if loss is None else float(loss)))
    ask = step >= _next or _terminating or time.monotonic() - _asked_at >= BATCH_SECONDS
    if not (ask or metrics):
        return Reply(checkpoint=False, stop=False)  # held: sent with a later step
    *before, message = _batches()
    for earlier in before:
        _send(earlier)
    if metrics:
        message["metrics"] = {name: float(value) for name, value in metrics.items()}
    if not ask:
        _send(message)  # for the stop rules now; their answer comes with the next question
        return Reply(checkpoint=False, stop=False)
    message["reply"] = True
    _send(message)
    answer = _answer()
    _next, _asked_at = int(answer.get("next", 0)), time.monotonic()
    # SIGTERM (the slot is being taken away): save once more and stop.
    return Reply(
        checkpoint=bool(answer.get("checkpoint")) or _terminating,
        stop=bool(answer.get("stop")) or _terminating,
    )


def _batches() -> list[dict[str, Any]]:
    """The held steps as messages (emptying them): one per run of steps with a loss or
    without. A step without a loss leaves `loss` out (a batch, `losses`): `null` in either
    is a non-finite loss, as JavaScript's JSON.stringify writes NaN."""
    groups: list[list[tuple[int, float | None]]] = []
    for held in _held:
        if groups and (groups[-1][-1][1] is None) == (held[1] is None):
            groups[-1].append(held)
        else:
            groups.append([held])
    _held.clear()
    messages = []
    for group in groups:
        steps = [step for step, _ in group]
        losses = [loss for _, loss in group]
        message: dict[str, Any] = {"step": steps[0]} if len(steps) == 1 else {"steps": steps}
        if losses[0] is not None:
            message.update({"loss": losses[0]} if len(steps) == 1 else {"losses": losses})
        messages.append(message)
    return messages


def _send_held() -> None:
    """Send the steps still held, without waiting for an answer (the program saves without
    being asked, or exits)."""
    if _held and active():
        for message in _batches():
            _send(message)


def saved(step: int) -> None:
    """Your state for `step` is complete in `checkpoint_dir()`: the campaign commits it (and
    returns once it has copied the folder, so you may write into it again)."""
    if active():
        _send_held()
        _send({"saved": int(step), "reply": True})
        _answer()


def _on_sigterm(signum: int, frame: Any) -> None:
    global _terminating
    _terminating = True


if active() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _on_sigterm)
atexit.register(_send_held)  # a loop that ended on its own: its last steps still count
