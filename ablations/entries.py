"""Which workload entry modules a served campaign may import: the allow-list.

A plan names its workload as `module:attr`, and importing the module runs its code. From the
terminal that is the user's own choice; from the Prefect UI or API it is anyone's who reaches
the server, so `ablate serve` imports only the built-in workloads and the modules the operator
names (`--allow-entry mypkg.train`), and refuses anything else before it is imported.
"""

from __future__ import annotations

from collections.abc import Iterable

from ablations.errors import WorkloadError, short_repr

BUILTIN_ENTRY_MODULES = frozenset(
    {
        "ablations.workloads.digits",
        "ablations.workloads.charlm",
        # The framework adapters import only the modules the plan names, and those are checked
        # against the list too. The command adapter runs any program: never built in (an
        # operator allows it with `--allow-entry ablations.byo.command`).
        "ablations.byo.lightning",
        "ablations.byo.hf",
    }
)
"""The workloads this package ships (extend `builtin_entry_modules` with new ones)."""


def builtin_entry_modules() -> frozenset[str]:
    """The entry modules every served campaign may import: the workloads this package ships."""
    return BUILTIN_ENTRY_MODULES


def entry_module(entry: str) -> str:
    """The module part of `module:attr`."""
    return entry.partition(":")[0]


def entry_allowed(entry: str, allowed: Iterable[str]) -> bool:
    """Whether `entry`'s module is built in, or is (or lies inside) an allowed module or
    package: `mypkg` allows `mypkg.train`, never `mypkg_evil`."""
    module = entry_module(entry)
    names = builtin_entry_modules() | set(allowed)
    return any(module == name or module.startswith(f"{name}.") for name in names)


def require_allowed_entry(entry: str, allowed: Iterable[str]) -> None:
    """`WorkloadError` (one line, before any import) unless `entry_allowed`."""
    allowed = sorted(set(allowed))
    if not entry_allowed(entry, allowed):
        extra = f" and {', '.join(allowed)}" if allowed else ""
        raise WorkloadError(
            f"workload.entry {short_repr(entry)} is not on this server's allow-list (the built-in "
            f"workloads{extra}); its operator allows a module with `ablate serve --allow-entry "
            "MODULE` (on a pool host: ABLATE_ALLOW_ENTRY)"
        )
