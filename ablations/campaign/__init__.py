"""The campaign's machinery, over its output folder (no Prefect here).

folder.py      `CampaignFolder`: every file name of the output contract, typed reads/writes
state.py       registration (frozen, hashed), saving completion records, leftover temporaries
campaign.py    `Campaign`: a registered campaign loaded once per process (plan, runs, state)
executor.py    the `Executor` protocol: where runs, preflight and results run
steps.py       the restartable steps the tasks wrap: preflight, a run, the gate, reframe
looks.py       the main phase's looks: the runs each starts, and its decisions
specs.py       a registered run's `RunSpec`
gate.py        the decision gate's policy (continue / trim / reframe / fix)
scheduling.py  longest runs first, from the pilot's step times
lock.py        one writer per output folder
"""
