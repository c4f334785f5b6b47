"""`import ablate_report` wherever ablate is installed: the helper a training script reports
with (every call a no-op when no campaign runs the script, so the same script runs bare).

The helper itself is `ablations/byo/helper/ablate_report.py`, standard library only; a command
that ablate runs finds that file first on its PYTHONPATH (any interpreter). This top-level
module, installed with the package, makes the same import work in a script run by hand: it
replaces itself with the helper, so there is one module object (its state, its functions).
"""

import importlib
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # its names, as a type checker sees them
    from ablations.byo.helper.ablate_report import *  # noqa: F403
else:
    sys.modules[__name__] = importlib.import_module("ablations.byo.helper.ablate_report")
