"""What one run is: its spec and record, the workload protocol it trains, the hooks it calls.

records.py   `RunSpec` (what to run) and `RunRecord` (what happened): small, pickled, in JSON
workload.py  the `Workload` protocol a user's training code implements
hooks.py     the seam between the training driver and checkpointing
"""
