"""Named points between two writes of the output folder, where a test kills the process.

    crash_point("after-plan")     # exits here, as a kill -9 would, when ABLATE_FAULT names it

The fault suite (tests/faults/) sets `ABLATE_FAULT` to one point to prove that a campaign
killed exactly there is completed correctly by a rerun. Unset (always, in real use) it costs
one environment lookup per point, and no point is on a per-step path.
"""

from __future__ import annotations

import os

FAULT = "ABLATE_FAULT"
"""The environment variable naming the point to die at."""
FAULT_EXIT = 86
"""The exit status of a process that died at its crash point (distinct from 0, 1 and 2)."""

AFTER_PLAN = "after-plan"
"""plan.yaml is written, registration.json is not."""
AFTER_GATE = "after-gate"
"""gate.json is written, the trimmed runs' records and the reframe draft are not."""
AFTER_LOOK_1 = "after-look-1"
"""The first look is recorded in looks.json; the second look's runs have not started."""
POINTS = (AFTER_PLAN, AFTER_GATE, AFTER_LOOK_1)


def crash_point(name: str) -> None:
    """Exit at once, with no cleanup of any kind, when `ABLATE_FAULT` names this point."""
    if os.environ.get(FAULT) == name:
        os._exit(FAULT_EXIT)
