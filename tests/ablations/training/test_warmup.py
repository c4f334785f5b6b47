"""The first acts of a process that will train: pin the visible devices and the thread count,
and say (rather than raise) why the workload does not import."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
import torch

from ablations.training.warmup import preload_for_training, prepare_torch_process

DIGITS = "ablations.workloads.digits:DigitsWorkload"


@pytest.fixture(autouse=True)
def restore_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "unchanged")  # restored after the test
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_without_a_workload_it_pins_the_device_and_threads_only() -> None:
    wanted = 1 if torch.get_num_threads() != 1 else 2
    assert prepare_torch_process("3", wanted, ()) is None
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    assert torch.get_num_threads() == wanted


def test_a_workload_that_imports_is_no_problem() -> None:
    assert prepare_torch_process("", 1, [("workload.entry", DIGITS)]) is None


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ("no_such_module_xyz:Work", "module 'no_such_module_xyz' cannot be found"),
        ("ablations.workloads.digits:NoSuchClass", "has no 'NoSuchClass'"),
    ],
)
def test_a_workload_that_does_not_import_is_named_not_raised(entry: str, named: str) -> None:
    problem = prepare_torch_process("0", 1, [("workload.entry", DIGITS), ("workload.x", entry)])
    assert problem is not None and named in problem.message
    assert (problem.path, problem.value) == ("workload.x", entry)  # the field that names it


def test_preloading_imports_what_the_first_optimizer_would() -> None:
    preload_for_training()
    assert "torch._dynamo" in sys.modules
