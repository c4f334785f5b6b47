"""Counts how often each process of a campaign parses its plan (`tests/flows/test_parse_count.py`).

With this folder on PYTHONPATH and `ABLATE_PARSE_LOG` naming a file, every Python process the
campaign starts (the CLI's, the fork server, each slot's worker) imports this module at start up
and wraps, as each module is first imported, the functions that parse or read a plan, check a
folder's registration, hash the user's code and read a manifest. Each call appends one line to
the log: the pid, what was done, and the project's frames that called it (innermost first). The
wrappers are in place before any other module binds those names (`from ... import parse_plan`
runs after the module's own code), so every call is counted, in every process, the real code
unchanged."""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

LOG = os.environ.get("ABLATE_PARSE_LOG")
PROJECT = ("/ablations/", "/flows/", "/tasks/")

# module -> (attribute path, what the log calls a call of it)
COUNTED: dict[str, list[tuple[str, str]]] = {
    "ablations.plan.model": [("parse_plan", "parse")],
    "ablations.plan.io": [("read_plan_text", "read")],
    "ablations.campaign.folder": [("CampaignFolder.plan_text", "read")],
    "ablations.campaign.opening": [("existing_registration", "registration")],
    "ablations.campaign.code": [("workload_code", "code")],  # hashing the user's code
    # asked for, and parsed from the file
    "ablations.campaign.manifest": [
        ("read_manifest", "manifest"),
        ("parse_manifest", "manifest-parse"),
    ],
}


def _callers() -> str:
    frames = []
    frame = sys._getframe(2)
    while frame is not None and len(frames) < 4:
        name = frame.f_code.co_filename
        if name != __file__ and any(part in name for part in PROJECT):
            top = next(name.rindex(part) for part in PROJECT if part in name)
            frames.append(f"{name[top + 1 :]}:{frame.f_lineno}")
        frame = frame.f_back
    return " < ".join(frames)


def _counted(what: str, call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    def counting(*args: Any, **kwargs: Any) -> Any:
        line = f"{os.getpid()} {what} {_callers()}\n".encode()
        fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # type: ignore[arg-type]
        try:
            os.write(fd, line)  # one write of a short line: whole, whatever the other processes do
        finally:
            os.close(fd)
        return call(*args, **kwargs)

    return counting


def _wrap(module: ModuleType) -> None:
    for path, what in COUNTED[module.__name__]:
        owner: Any = module
        *outer, name = path.split(".")
        for part in outer:
            owner = getattr(owner, part)
        setattr(owner, name, _counted(what, getattr(owner, name)))


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in COUNTED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _wrap(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if LOG:
    sys.meta_path.insert(0, _Finder())
