"""Preflight: the checks that must pass before the pilot.

data_check.py     the workload's inputs against the plan's expected counts
restart_check.py  does a checkpoint continue the run exactly? (save, then reload elsewhere)
verdict.py        the restart check's halves compared: a `restart` stop or nothing
across.py         the campaign's preflight on a leased slot, continued in another process
"""
