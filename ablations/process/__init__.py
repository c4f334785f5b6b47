"""How a process of the campaign ends, and what it leaves behind.

preemption.py    a SIGTERM asks every running run to commit its step and stop
crash_points.py  named points between two writes where the fault tests kill the process
scratch.py       scratch folders a killed process does not leave behind for good
parent_watch.py  a child process dies with its parent (slot workers, the Prefect server)
"""
