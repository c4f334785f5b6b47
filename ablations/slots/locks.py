"""Slots leased across processes: an exclusive `flock` on a lock file per slot.

The in-process `SlotLease` keeps one campaign's runs apart; two campaigns on one machine (two
`ablate run`s, or a campaign and a pool worker's flow runs) are separate processes, so each
run also holds its slot's lock file, `<lock_dir>/<host>-<slot>.lock`, while it uses the slot.
The kernel drops a lock when its holder dies, so a killed campaign never keeps its slot.

Both take the folder and the host name from the environment (`SlotLocks.from_env`):

    ABLATE_SLOT_DIR   where the lock files live (default: <tmp>/ablate-slots)
    ABLATE_HOST       the host's name in the lock files (default: the hostname)

A local campaign and a pool worker on the same machine exclude each other when their host
names match (a worker started with another `ABLATE_HOST`, or another `ABLATE_SLOT_DIR`, does
not) and their slots have the same names (`cuda:0` with one slot per device on both; with
`slots_per_device` above 1 the names are `cuda:0#k`, and a campaign with one slot per device
does not see them).
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ablations.slots.devices import SlotLease, SlotSpec
from ablations.text.say import say

T = TypeVar("T")

POLL_SECONDS = 0.5
"""How often a run waiting for a busy slot retries its lock (a run lasts minutes)."""

LOCK_DIR_MODE = 0o1777
"""The default folder is shared by every user of the machine (two researchers on one box), so
each must be able to create its lock files there and none may remove another's: /tmp's mode."""


@dataclass(frozen=True)
class SlotLocks:
    """Where this machine's slot locks live and the host name they carry."""

    host: str
    """The host's name in the lock files (and in a pool run's slot name)."""
    lock_dir: Path
    """The folder of the lock files, shared by every campaign and pool worker of the host."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SlotLocks:
        """From `ABLATE_HOST` and `ABLATE_SLOT_DIR` (see the module's docstring)."""
        env = os.environ if environ is None else environ
        host = env.get("ABLATE_HOST") or socket.gethostname()
        lock_dir = env.get("ABLATE_SLOT_DIR") or str(Path(tempfile.gettempdir()) / "ablate-slots")
        return cls(host=host, lock_dir=Path(lock_dir))

    def lock_path(self, slot: SlotSpec) -> Path:
        """The lock file of one slot (names made safe for a file name)."""
        return self.lock_dir / re.sub(r"[^A-Za-z0-9._-]", "_", f"{self.host}-{slot.name}.lock")

    def try_lock(self, slot: SlotSpec) -> int | None:
        """The slot's lock, taken without waiting: its descriptor (give it to `unlock`), or
        None while another process holds it."""
        fd = _open_lock(self.lock_path(slot))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    @contextmanager
    def held(self, slot: SlotSpec, give_up: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold the slot's lock for the block; while another process holds it, say so once
        and wait. `give_up()`, called before each retry, may raise to stop waiting (a campaign
        asked to stop starts nothing new)."""
        fd = self.try_lock(slot)
        if fd is None:
            say(self.waiting_line(slot))
        while fd is None:
            if give_up is not None:
                give_up()
            time.sleep(POLL_SECONDS)
            fd = self.try_lock(slot)
        try:
            yield
        finally:
            unlock(fd)

    def waiting_line(self, slot: SlotSpec) -> str:
        """What a run waiting for the slot says, once."""
        path = self.lock_path(slot)
        return f"{slot.name} is in use by another campaign on this machine (lock {path}): waiting"


@contextmanager
def lease_held(
    leases: SlotLease[T],
    slot_of: Callable[[T], SlotSpec],
    locks: SlotLocks,
    give_up: Callable[[], None] | None = None,
) -> Iterator[T]:
    """One of `leases` (a campaign's workers) whose slot's lock it holds, for the block.

    One found held by another process goes back to the queue's end and the next free one is
    tried, so a run never waits for one card while another of its campaign's is idle; once
    every free one was tried, one line (the first time, naming one) and a pause of
    `POLL_SECONDS`.
    `give_up()`, called before each pause, may raise to stop waiting."""
    said = False
    tried: set[str] = set()
    while True:
        with leases.lease() as item:
            slot = slot_of(item)
            fd = locks.try_lock(slot)
            if fd is not None:
                try:
                    yield item
                finally:
                    unlock(fd)
                return
        if slot.name in tried:  # every free one tried since the last pause
            if not said:
                said = True
                say(locks.waiting_line(slot))
            if give_up is not None:
                give_up()
            time.sleep(POLL_SECONDS)
            tried.clear()
        tried.add(slot.name)


def unlock(fd: int) -> None:
    """Release a lock `try_lock` took (closing the descriptor drops it)."""
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _open_lock(path: Path) -> int:
    """The lock file, opened read-only (flock needs no write access, so another user's lock
    file serves too) and created only when missing: Linux's `protected_regular` refuses an
    `O_CREAT` open of another user's file in a shared sticky folder such as /tmp's."""
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        pass
    if not path.parent.is_dir():  # the first lock on this machine: make the folder
        _make_shared_dir(path.parent)
    try:
        return os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except PermissionError:  # another user's process made it meanwhile
        return os.open(path, os.O_RDONLY)


def _make_shared_dir(path: Path) -> None:
    """The lock folder, writable by every user when this process makes it."""
    try:
        path.mkdir(parents=True)
    except FileExistsError:  # another process made it meanwhile
        return
    if stat.S_IMODE(path.stat().st_mode) != LOCK_DIR_MODE:  # the umask took bits off
        os.chmod(path, LOCK_DIR_MODE)
