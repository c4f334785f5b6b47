"""What the results step writes into the output folder.

write.py       the results step: manifest, runs.csv, ledger, report, RELOAD.md
job.py         the results step as a slot worker's job (`ResultsJob`)
manifest.py    the typed `Manifest` / `ManifestRun` that the step writes and report and verify read
ledger.py      the Optuna ledger of every run
reload_doc.py  RELOAD.md: how to reload each artifact
"""
