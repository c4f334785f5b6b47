"""`ablate probe`: each variant's step time and peak memory at a few batch sizes.

sweep.py  the sweep over variants and input groups, probe.json and PROBE.md, card advice

One variant's points are measured in a slot's worker: `ablations.workers.probe_point`.
"""
