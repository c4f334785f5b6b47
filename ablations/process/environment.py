"""Variables set in this process's environment for a while, as they were afterwards."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


@contextmanager
def environment_set(values: Mapping[str, str]) -> Iterator[None]:
    """`values` in `os.environ` inside the block; afterwards each name has its earlier value
    again, or is unset if it had none (whatever the block changed them to)."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
