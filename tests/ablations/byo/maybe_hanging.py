"""`maybe_hanging.py HANG [ARGS...]`: `hanging_script.py` when HANG is `true`, else
`linear_script.py ARGS...`: one command line for a campaign whose variant `hang=true` hangs."""

import runpy
import sys
from pathlib import Path

hang, sys.argv = sys.argv[1] == "true", [sys.argv[0], *sys.argv[2:]]
script = "hanging_script.py" if hang else "linear_script.py"
runpy.run_path(str(Path(__file__).with_name(script)), run_name="__main__")
