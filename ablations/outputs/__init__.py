"""What the results step writes: the manifest, runs.csv, the ledger, RELOAD.md."""
