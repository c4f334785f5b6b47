"""Where runs run: this machine's devices as slots, and the hosts of a work pool.

devices.py       which devices exist, `SlotSpec`, slots per device, the thread-safe lease
worker.py        one long-lived process per slot, pinned to its device before torch loads
messages.py      the typed jobs and replies between the campaign and a worker
jobs.py          what a worker does with a job (a run, preflight, a continuation)
parent_watch.py  a worker dies with the campaign process
local.py         `LocalSlots`: the local executor (a worker per slot)
host.py          a pool host's slots, leased across its flow-run processes
attempts.py      a run on a pool host: fenced attempts, heartbeat, results in the store
"""
