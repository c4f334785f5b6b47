"""Terminal progress lines for `ablate run` (Prefect's own logs stay quiet)."""

from __future__ import annotations

import sys
import time

_START = time.monotonic()


def say(text: str) -> None:
    """Print one progress line with the seconds since the campaign process started."""
    print(f"[{time.monotonic() - _START:7.1f}s] {text}", file=sys.stdout, flush=True)
