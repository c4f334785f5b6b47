"""A slot's worker process and the jobs it runs.

worker.py       one long-lived process per slot, pinned to its device before torch loads;
                it knows no kind of job: it runs each and replies
messages.py     the pipe's messages: `Job` (each runs itself), the replies, the `Worker` protocol
jobs.py         the jobs and what they run: a run, the preflight, a continuation, a probe
probe_point.py  one variant's `ablate probe` points, measured in the worker
output.py       the frameworks' output to the run's log while a job runs
zygote.py       the fork server's preload: torch imported once for every worker forked
"""
