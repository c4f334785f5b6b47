"""What a served campaign may reach: the workload modules it may import, the stores it may use.

A plan names its workload as `module:attr`, and importing the module runs its code. From the
terminal that is the user's own choice; from the Prefect UI or API it is anyone's who reaches
the server, so `ablate serve` imports only the built-in workloads and the modules the operator
names (`--allow-entry mypkg.train`), and refuses anything else before it is imported.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ablations.errors import InputError, WorkloadError, short_repr

BUILTIN_ENTRIES = (
    "ablations.workloads.digits:DigitsWorkload",
    "ablations.workloads.charlm:CharLMWorkload",
    # The framework adapters import only the modules the plan names, and those are checked
    # against the list too. The command adapter runs any program: never built in (an
    # operator allows it with `--allow-entry ablations.byo.command`).
    "ablations.byo.lightning:LightningWorkload",
    "ablations.byo.hf:TrainerWorkload",
)
"""The workloads this package ships, as a plan names them (`module:attr`, the names users
write: tests/test_import_cycles.py checks that each resolves)."""
BUILTIN_ENTRY_MODULES = frozenset(entry.partition(":")[0] for entry in BUILTIN_ENTRIES)
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


# -- stores ---------------------------------------------------------------------------------


def store_allowed(
    store: str, endpoint_url: str | None, roots: Iterable[Path], allowed: Iterable[str]
) -> bool:
    """Whether a served plan's checkpoint store stays within what its operator allows:
    `memory://` and a relative `file://` store (inside the output folder) always; an absolute
    `file://` folder under a root (symbolic links resolved) or an allowed one; an `s3://`
    store only under an allowed URL (`s3://bucket/prefix` allows that prefix and what lies
    below it, never `s3://bucket/prefix-other`), and its `endpoint_url` only when that URL is
    allowed too. A store outside is where a served plan would read or write for anyone who
    reaches the Prefect API."""
    scheme, _, rest = store.partition("://")
    entries = list(allowed)
    if endpoint_url is not None and not any(_under(endpoint_url, e) for e in entries):
        return False
    if scheme == "memory" or (scheme == "file" and not rest.startswith("/")):
        return True
    if scheme == "file":
        target = Path(rest).resolve()
        folders = [
            *roots,
            *(Path(e[len("file://") :]).resolve() for e in entries if e.startswith("file:///")),
        ]
        return any(target == root or root in target.parents for root in folders)
    return any(_under(store, e) for e in entries)


def _under(url: str, entry: str) -> bool:
    url, entry = url.rstrip("/"), entry.rstrip("/")
    return url == entry or url.startswith(f"{entry}/")


def require_allowed_store(
    store: str, endpoint_url: str | None, roots: Iterable[Path], allowed: Iterable[str]
) -> None:
    """`InputError` (one line, before the store is opened) unless `store_allowed`."""
    allowed = sorted(set(allowed))
    if store_allowed(store, endpoint_url, roots, allowed):
        return
    what = f"checkpoint.store {short_repr(store)}"
    if endpoint_url is not None:
        what += f" (endpoint_url {short_repr(endpoint_url)})"
    raise InputError(
        f"{what} is outside what this server allows (a relative file:// store, the --root "
        f"folders, and {', '.join(allowed) or 'no store URL'}); its operator allows a store "
        "with `ablate serve --allow-store URL` (on a pool host: ABLATE_ALLOW_STORE)"
    )
