"""environment_set: the values inside the block, every name as it was afterwards."""

from __future__ import annotations

import os

import pytest

from ablations.process.environment import environment_set


def test_values_hold_inside_and_the_earlier_ones_return(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ABLATE_TEST_KEPT", "before")
    monkeypatch.delenv("ABLATE_TEST_NEW", raising=False)
    with (
        pytest.raises(RuntimeError),
        environment_set({"ABLATE_TEST_KEPT": "inside", "ABLATE_TEST_NEW": "inside"}),
    ):
        assert os.environ["ABLATE_TEST_KEPT"] == os.environ["ABLATE_TEST_NEW"] == "inside"
        os.environ["ABLATE_TEST_NEW"] = "changed by the block"
        raise RuntimeError("the block failed")
    assert os.environ["ABLATE_TEST_KEPT"] == "before"
    assert "ABLATE_TEST_NEW" not in os.environ
