"""A program that hangs: it reports `HANG_AFTER` steps (default 0), then starts a child that
sleeps holding its stdout (the child's pid written to the file `CHILD_PID`, when given), and
blocks reading its stdin for an answer it never asked for, as a script waiting on `input()`
does. Only the report
timeout ends it in time: it gives up by itself (exit 3) after `GIVE_UP` seconds (default
30), so that a test without the timeout fails instead of hanging."""

import json
import os
import subprocess
import sys
import threading

GIVE_UP = float(os.environ.get("GIVE_UP", "30"))
give_up = threading.Timer(GIVE_UP, os._exit, args=(3,))
give_up.daemon = True
give_up.start()

for step in range(1, int(os.environ.get("HANG_AFTER", "0")) + 1):
    print(json.dumps({"step": step, "loss": 1.0 / step}), flush=True)
child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({GIVE_UP})"])
if os.environ.get("CHILD_PID"):
    with open(os.environ["CHILD_PID"], "w") as handle:
        handle.write(str(child.pid))
sys.stdin.read()
