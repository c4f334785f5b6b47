"""The campaign's machinery, over its output folder (no Prefect here).

opening.py     the plan admitted (one parse), then registered and loaded under the lock
folder.py      `CampaignFolder`: every file name of the output contract, typed reads/writes
state.py       saving completion records, leftover temporaries
code.py        the user's code, hashed into the registration
campaign.py    `Campaign`: a registered campaign loaded once per process (plan, runs, state)
manifest.py    the typed `Manifest` / `ManifestRun` the results step writes, report and verify read
executor.py    the `Executor` protocol: where runs, preflight and results run
steps.py       the restartable steps the tasks wrap: preflight, a run, the gate, reframe
looks.py       the main phase's looks: the runs each starts, and its decisions
specs.py       a registered run's `RunSpec`
gate.py        the decision gate's policy (continue / trim / reframe / fix)
scheduling.py  longest runs first, from the pilot's step times
live.py        the campaign while it runs: done, running, left, spent, projected finish
progress.py    a campaign's progress lines: a run's outcome, the looks, the tables of runs
lock.py        one writer per output folder
"""
