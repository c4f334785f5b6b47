"""`ablate verify`: every artifact of an output folder reloaded and checked.

folder.py  the command: manifest, files, checkpoints and re-evaluated metrics
files.py   each file present, non-empty, its recorded sha256, and it parses
layout.py  the folder's expected entries (unexpected files, symlinks, temporaries)
reload.py  the ledger, the checkpoints and the final models reloaded (metrics re-evaluated)
"""
