"""Where runs run: this machine's devices as slots, and the hosts of a work pool.

devices.py       which devices exist, `SlotSpec`, slots per device, the thread-safe lease
worker.py        one long-lived process per slot, pinned to its device before torch loads;
                 it knows no kind of job: it runs each and replies
messages.py      the pipe's messages: `Job` (each runs itself), the replies, the typed errors
jobs.py          the jobs and what they run: a run, the preflight, a continuation, a probe
parent_watch.py  a worker dies with the campaign process
zygote.py        the fork server's preload: torch imported once for every worker forked
local.py         `LocalSlots`: the local executor (a worker per slot)
host.py          a pool host's slots, leased across its flow-run processes
attempts.py      a run on a pool host: fenced attempts, heartbeat, results in the store
"""
