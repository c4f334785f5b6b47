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
server exits when the campaign process is gone (multiprocessing closes its pipe); a SIGTERM to
the process group may end it sooner, which no worker depends on.
"""

from __future__ import annotations

import gc

import torch._dynamo  # noqa: F401  (torch, and what the first optimizer imports in a worker)

# Everything imported so far lives as long as the server and every worker: out of the
# garbage collector's reach (the use `gc.freeze` is documented for, before forking). A
# worker's collections no longer walk torch's objects, which so stay in pages the workers
# share, and the server's exit skips collecting them: 0.9 s less before a campaign's output
# closes (measured; the server holds the campaign's stdout until it exits).
gc.freeze()
