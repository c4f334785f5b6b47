"""The results step: what it writes into the output folder at the end of a campaign.

write.py       the step: ledger, runs.csv, manifest, report, RELOAD.md, in that order
job.py         the step as a slot worker's job (`ResultsJob`)
summary.py     a finished campaign in a few lines for the Prefect UI, from the manifest
ledger.py      the Optuna ledger of every run
reload_doc.py  RELOAD.md: how to reload each run file

The manifest's model (`Manifest`, `ManifestRun`) is the campaign's: `ablations.campaign.manifest`.
"""
