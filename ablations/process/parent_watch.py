"""Child processes that die with the campaign process, even when it is killed with SIGKILL.

Two independent watches, because either alone has a gap: Linux's parent-death signal
(`prctl(PR_SET_PDEATHSIG)`) arrives at once but follows the *thread* that started the child,
and is Linux-only; the end of the pipe to the parent (EOF, seen by a watcher thread while the
child is busy training) works everywhere but only for children that hold such a pipe.
A worker forked by the fork server (`ablations.workers.zygote`) has the server as its parent,
not the campaign: it keeps the pipe's watch and checks the campaign's pid, without the signal.
The fork server reads its parent's pipe only once its preload (torch) is imported: it holds the
signal until then (the thread that started it waits for that import, so cannot end first).
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
from multiprocessing.connection import Connection

PR_SET_PDEATHSIG = 1
"""prctl option: the signal a process gets when its parent dies (Linux)."""
# Looked up at import, not in a forked child: between fork and exec a child should only call
# what is already loaded (another thread may have held the loader's lock at the fork).
PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None
SERVER_PARENT_ENV = "ABLATE_FORK_SERVER_PARENT"
"""The pid of the process that starts the fork server (the campaign's), which it inherits: a
server orphaned before it could ask for the parent-death signal sees so and exits."""
_HANGUP = getattr(select, "POLLRDHUP", 0) | select.POLLHUP | select.POLLERR
_WATCH_SECONDS = 0.2


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask the kernel to send `sig` to this process when its parent (strictly: the parent's
    thread that started it) dies; 0 asks for nothing again. A no-op off Linux. Safe between
    fork and exec."""
    if PRCTL is not None:
        PRCTL(PR_SET_PDEATHSIG, sig)


def started_as_the_fork_server() -> bool:
    """Whether this process is the slot workers' fork server: a campaign process
    (`SERVER_PARENT_ENV`, its pid) started it. A process importing the server's module for
    another reason (a test listing every module, the campaign itself after it ran one in its
    own process) is not one, and must not take on the server's signals or exit."""
    expected = os.environ.get(SERVER_PARENT_ENV, "")
    return expected.isdigit() and int(expected) != os.getpid()


def die_with_the_server_parent() -> None:
    """In the fork server, before its preload: killed (SIGKILL) when the process that started
    it dies, and ended at once when that process (`SERVER_PARENT_ENV`) is gone already."""
    die_with_parent(signal.SIGKILL)
    expected = os.environ.get(SERVER_PARENT_ENV, "")
    if expected.isdigit() and os.getppid() != int(expected):
        os._exit(1)


def exit_when_parent_goes(conn: Connection, parent_pid: int) -> None:
    """In a child: exit at once (status 1, no cleanup: a run's half-written checkpoint has no
    commit marker and is never loaded) when the pipe to the parent hangs up or the parent is
    gone, checked by a daemon thread while the main thread works."""
    if _gone(parent_pid):  # it died before the watch began
        os._exit(1)

    def watch() -> None:
        poller = select.poll()
        poller.register(conn.fileno(), _HANGUP)
        while True:
            hangup = any(event & _HANGUP for _, event in poller.poll(_WATCH_SECONDS * 1000))
            if _outliving.is_set():  # terminating: its own deadline ends it (`outlive_parent`)
                return
            if hangup or _gone(parent_pid):
                os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _gone(parent_pid: int) -> bool:
    """Whether the campaign process has died. A spawned child's parent is the campaign; a
    child of the fork server (`ablations.workers.zygote`) asks whether that pid still exists."""
    if os.getppid() == parent_pid:
        return False
    try:
        os.kill(parent_pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process took the pid: ours is gone
        return True
    return False


_outliving = threading.Event()


def outlive_parent(seconds: float) -> None:
    """After a SIGTERM: keep this child alive if its parent dies now (a run is committing the
    checkpoint of its step: the parent's death no longer kills it), and exit (status 1) once
    `seconds` have passed, whatever it is doing then."""
    _outliving.set()
    if PRCTL is not None:
        PRCTL(PR_SET_PDEATHSIG, 0)
    deadline = threading.Timer(seconds, os._exit, args=(1,))
    deadline.daemon = True
    deadline.start()
