"""The slot workers' common parent: multiprocessing's fork server, with torch imported once.

Each slot worker used to be spawned, a fresh interpreter that imports torch and
`torch._dynamo` (the first optimizer needs it): about three CPU-seconds per worker, paid again
for every replacement after a crash. Forked from this server instead, a worker starts with both
already loaded, in milliseconds, and shares their pages with its siblings.

Forking is safe for CUDA only while the parent has not initialised it: this server imports
torch and touches no device (importing torch, and torch._dynamo, does not initialise CUDA),
and each worker refuses an inherited CUDA context before it picks its card
(`ablations.training.warmup.prepare_torch_process`). `ABLATE_WORKER_START=spawn` goes back to
spawning every worker (and off Linux, where there is no fork server, that is the default).

Only the fork server imports this module (`set_forkserver_preload`); importing it anywhere else
imports torch and freezes the garbage collector's view of what that process has loaded. The
server exits when the campaign process is gone: while it imports torch, by the parent-death
signal (multiprocessing reads the campaign's pipe only after the preload: a campaign killed as
it started once left the server importing for 5 s more), then when that pipe closes; a
SIGTERM to the process group may end it sooner, which no worker depends on.

The signal follows the campaign's thread that started the server, not the process: it is
cleared once torch is imported. That thread cannot end before: it waits for the server's
answer (the pid of the worker it asked for), which comes only after the preload.
"""

from __future__ import annotations

import gc
import signal

from ablations.process.parent_watch import (
    die_with_parent,
    die_with_the_server_parent,
    started_as_the_fork_server,
)

# Imported anywhere else (a test importing every module, say), the module only imports:
# the signals and the early exit below would otherwise land on that process (a test process
# that had run a campaign in-process exited at once, its campaign's pid not its parent's).
SERVER = started_as_the_fork_server()
if SERVER:
    # A Ctrl-C at the terminal reaches the whole process group, this server too:
    # multiprocessing protects it from SIGINT only after its preload (seconds of importing
    # torch), and a server killed there fails every worker's start with a traceback. The
    # campaign process alone acts on it (`flows/cli.py`), so ignore it from the first line
    # (the workers ignore it too).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Killed with the campaign while importing: a kernel signal, not a thread's poll, which
    # the import's long C calls (loading libtorch) would hold off for as long as they hold
    # the GIL.
    die_with_the_server_parent()

import torch._dynamo  # noqa: E402, F401  (torch, and what the first optimizer imports in a worker)

# Everything imported so far lives as long as the server and every worker: out of the
# garbage collector's reach (the use `gc.freeze` is documented for, before forking). A
# worker's collections no longer walk torch's objects, which so stay in pages the workers
# share, and the server's exit skips collecting them: 0.9 s less before a campaign's output
# closes (measured; the server holds the campaign's stdout until it exits).
gc.freeze()
# From here multiprocessing reads the campaign's pipe; the thread that started the server may
# end once its worker is forked, which must not kill the server.
if SERVER:
    die_with_parent(0)
