"""`ablate probe`: each variant's step time and peak memory at a few batch sizes.

sweep.py  the sweep over variants and input groups, probe.json and PROBE.md, card advice
point.py  one variant's points, measured in a slot's worker
"""
