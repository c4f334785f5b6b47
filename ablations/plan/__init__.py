"""The plan: what a researcher registers before anything runs.

section.py         `Section`, the base of every section, and the value types they share
workload.py        the `workload` section: the training code, its adapters, its data
experiment.py      what is compared, judged how: campaign, control, factors, interactions, metric
rules.py           rules registered before anything runs: stop rules, the pilot, the gate
infrastructure.py  where and how runs run: checkpoints, devices and slots, the probe
offers.py          what was rented and what it costs: package, offers, estimates
design.py          the seeds' design: fixed, or sequential with looks and their error control
model.py           `Plan` (the sections together, cross-checked) and its hash
io.py              reading a plan file: bounded, no YAML tags, one error naming every problem
variants.py        a variant, a planned run and its id
runs.py            the plan's variants and planned runs in registration order, and their caps
"""
