"""One run's training, in a slot's worker process.

driver.py      the loop: steps, evaluations, stop rules, checkpoint hook, its record
stop_rules.py  the stop rules written before anything runs (divergence, plateau, ...)
memory.py      peak memory per phase of a run (build, train, evaluate)
warmup.py      a worker's start: devices pinned, torch and the workload imported early
"""
