"""Deprecated: `ablations.records` moved to `ablations.run.records` (import the names from
`ablations` itself: `from ablations import RunSpec`). Kept importable for one
release, with a DeprecationWarning; this name is that module, so its classes are the same."""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING

import ablations.run.records as _moved

if TYPE_CHECKING:  # the names, for a type checker reading the old path
    from ablations.run.records import *  # noqa: F403

NEW = "ablations.run.records"

warnings.warn(
    f"{__name__} is deprecated: import from `ablations` (e.g. `from ablations import "
    f"RunSpec`) or from {NEW}",
    DeprecationWarning,
    stacklevel=2,  # the importing line: `warnings` skips importlib's frames
)
sys.modules[__name__] = _moved
