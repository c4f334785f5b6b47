"""A package's public names, each imported from its module on first use (PEP 562's module
`__getattr__`): `ablations` and `ablations.report` export names whose modules load torch or
matplotlib, which a process importing one small name must not pay for."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, public: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's `__getattr__` and `__dir__` for `public` (name -> defining module);
    `namespace` is the package's `globals()`, where each name is kept once looked up."""

    def getattr_(name: str) -> Any:
        module = public.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # looked up once
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(public))

    return getattr_, dir_
