"""Deprecated: `ablations.preemption` moved to `ablations.process.preemption` (import the
names from `ablations` itself: `from ablations import TERMINATE`). Kept importable for one
release, with a DeprecationWarning; this name is that module, so its `TERMINATE` is the same."""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING

import ablations.process.preemption as _moved

if TYPE_CHECKING:  # the names, for a type checker reading the old path
    from ablations.process.preemption import *  # noqa: F403

NEW = "ablations.process.preemption"

warnings.warn(
    f"{__name__} is deprecated: import from `ablations` (e.g. `from ablations import "
    f"TERMINATE`) or from {NEW}",
    DeprecationWarning,
    stacklevel=2,  # the importing line: `warnings` skips importlib's frames
)
sys.modules[__name__] = _moved
