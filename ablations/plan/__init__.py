"""The plan: what a researcher registers before anything runs.

sections.py  each plan section as a small documented pydantic model
model.py     `Plan` (the sections together, cross-checked) and its hash
io.py        reading a plan file: bounded, no YAML tags, one error naming every problem
variants.py  the control and one variant per factor level; `PlannedRun` and run ids
"""
