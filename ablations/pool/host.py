"""One host's slots, leased across processes: a lock file per slot.

A process work pool starts every flow run as its own process, so the thread-safe `SlotLease`
of one campaign process cannot share a host's devices between them. The slot locks of
`ablations.slots.locks` can (an exclusive `flock` on `<lock_dir>/<host>-<slot>.lock`, dropped
by the kernel when its holder dies, so a crashed run never keeps its slot); a local campaign
on the same machine takes the same locks, so the two exclude each other when their host
names match.

The host's settings come from the worker's environment (its flow runs inherit it), read once
in `HostSlots.from_env`:

    ABLATE_DEVICES    auto | N (CPU slots) | cuda:0,cuda:1    the devices of this host
    ABLATE_HOST       the name records show (default: the hostname)
    ABLATE_SLOT_DIR   where the lock files live (default: <tmp>/ablate-slots)
    ABLATE_ALLOW_ENTRY  workload modules runs may import besides the built-in ones, comma
                      separated (unset: any; set, even empty: only those, see
                      `ablations.security.entries`)
    ABLATE_ALLOW_STORE  checkpoint stores (and S3 endpoints) runs may use, comma separated
                      (unset: any; set, even empty: only those)
    ABLATE_MAX_STEPS  the most steps of one run this host trains (`ablations.security.limits`)
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from ablations.plan.infrastructure import ResourcesSection
from ablations.slots.devices import SlotSpec, plan_slots
from ablations.slots.locks import POLL_SECONDS, SlotLocks, unlock
from ablations.text.say import say


@dataclass(frozen=True)
class HostSlots:
    """The slots of this host and where their locks live."""

    host: str
    slots: list[SlotSpec]
    lock_dir: Path
    allowed_entries: tuple[str, ...] | None = None
    """Workload modules this host's runs may import besides the built-ins (None: any)."""
    allowed_stores: tuple[str, ...] | None = None
    """Store URLs (and S3 endpoints) this host's runs may use (None: any)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> HostSlots:
        """The host's slots from `ABLATE_DEVICES`, `ABLATE_HOST` and `ABLATE_SLOT_DIR`."""
        env = os.environ if environ is None else environ
        devices = env.get("ABLATE_DEVICES", "auto")
        locks = SlotLocks.from_env(env)
        allowed = env.get("ABLATE_ALLOW_ENTRY")
        stores = env.get("ABLATE_ALLOW_STORE")
        return cls(
            host=locks.host,
            slots=plan_slots(ResourcesSection(), devices),
            lock_dir=locks.lock_dir,
            allowed_entries=None if allowed is None else tuple(e for e in allowed.split(",") if e),
            allowed_stores=None if stores is None else tuple(s for s in stores.split(",") if s),
        )

    @property
    def locks(self) -> SlotLocks:
        """This host's slot locks, the ones a local campaign on it takes too."""
        return SlotLocks(host=self.host, lock_dir=self.lock_dir)

    def lock_path(self, slot: SlotSpec) -> Path:
        """The lock file of one slot (names made safe for a file name)."""
        return self.locks.lock_path(slot)

    @contextmanager
    def lease(self, timeout_s: float | None = None) -> Iterator[SlotSpec]:
        """Hold one free slot of this host until the block ends; wait while all are busy.

        The slot handed out is named `<host>/<slot>` so records say where a run ran.
        `TimeoutError` after `timeout_s` seconds without a free slot (None: wait forever)."""
        locks = self.locks
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        waited = False
        while True:
            for slot in self.slots:
                fd = locks.try_lock(slot)
                if fd is None:
                    continue
                try:
                    yield replace(slot, name=f"{self.host}/{slot.name}")
                finally:
                    unlock(fd)
                return
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(
                    f"no free slot on {self.host} ({len(self.slots)} slots, locks in "
                    f"{self.lock_dir}) within {timeout_s} s"
                )
            if not waited:  # a worker whose --limit exceeds the host's devices took it
                waited = True
                say(
                    f"{self.host}: all {len(self.slots)} slot(s) busy; waiting for one (start "
                    "the worker with --limit at most ABLATE_DEVICES' count: a run waiting here "
                    "could have run on another host)"
                )
            time.sleep(POLL_SECONDS)
