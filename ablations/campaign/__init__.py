"""The campaign's machinery, over its output folder (no Prefect here).

folder.py      `CampaignFolder`: every file name of the output contract, typed reads/writes
state.py       registration (frozen, hashed), completion records, the registered runs
executor.py    the `Executor` protocol: where runs, preflight and results run
steps.py       the restartable steps the tasks wrap: preflight, a run, the gate, reframe
specs.py       a registered run's `RunSpec`
gate.py        the decision gate's policy (continue / trim / reframe / fix)
scheduling.py  longest runs first, from the pilot's step times
lock.py        one writer per output folder
"""
