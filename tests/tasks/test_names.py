"""Every Prefect task is named after what it does: its Prefect name (what the UI lists and
filters by) is its function's name in kebab case, and the function has the name of the domain
function it calls (ARCHITECTURE.md, *The tasks*)."""

from __future__ import annotations

import importlib
import pkgutil

from prefect import Task

import tasks
from ablations.campaign import looks, opening, steps


def _tasks() -> list[Task]:  # type: ignore[type-arg]
    found = []
    for module in pkgutil.iter_modules(tasks.__path__):
        loaded = importlib.import_module(f"tasks.{module.name}")
        found += [value for value in vars(loaded).values() if isinstance(value, Task)]
    return found


def test_each_task_is_named_after_its_function() -> None:
    found = _tasks()
    assert len(found) >= 11  # every step of the flow
    named = {t.fn.__name__: t.name for t in found}
    assert named == {name: name.replace("_", "-") for name in named}


def test_a_task_has_the_name_of_the_domain_step_it_calls() -> None:
    wrapped = {t.fn.__name__ for t in _tasks()} - {"show_curves", "write_results"}
    domain = {name for module in (steps, looks, opening) for name in vars(module)}
    assert wrapped <= domain, wrapped - domain
