"""bench/build_wheelhouse.py without a registry: the closure it carries for a target Python,
what it leaves to the target's own packages, and its `check` of an installed environment."""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement

from tests.bench.scripts import load

wheelhouse = load("build_wheelhouse")


@pytest.fixture(scope="module")
def closure() -> object:
    markers = wheelhouse.target_markers("3.12")
    return wheelhouse.walk(wheelhouse.roots(wheelhouse.MOTO_S3_SERVER), markers)


def test_the_closure_reaches_every_runtime_dependency(closure: object) -> None:
    versions = closure.versions  # type: ignore[attr-defined]
    for name in ("prefect", "optuna", "pydantic", "pydantic-core", "s3fs", "fsspec", "moto",
                 "flask", "torch", "numpy"):  # fmt: skip
        assert versions.get(name), name
    assert "ruff" not in versions and "mypy" not in versions  # dev tools are not runtime
    assert "cfn-lint" not in versions  # moto's S3 server alone, not every service's


def test_what_the_target_has_stays_there_unless_pinned(closure: object) -> None:
    have = {"numpy", "fsspec", "prefect", "httpcore"}
    pins, newest = wheelhouse.wanted(closure, have, carry=set())
    names = {p.split("==")[0] for p in pins}
    assert "torch" not in names and "ablate" not in names  # the target's own torch: the point
    assert "numpy" not in names and "prefect" not in names and "httpcore" not in names
    assert "pydantic-core" in names and "s3fs" in names
    carried, _ = wheelhouse.wanted(closure, have, carry={"fsspec"})
    assert any(p.startswith("fsspec==") for p in carried)
    assert all("==" in p for p in pins) and newest == []


@pytest.mark.parametrize(
    ("text", "exact"),
    [("fsspec==2026.9.0", True), ("httpcore==1.*", False), ("x>=1,<2", False), ("y===3", True)],
)
def test_only_an_exact_pin_is_carried_over_the_targets_own(text: str, exact: bool) -> None:
    assert wheelhouse.pinned(Requirement(text)) is exact


def test_markers_are_the_targets() -> None:
    markers = wheelhouse.target_markers("3.12")
    assert markers["python_version"] == "3.12" and markers["platform_machine"] == "x86_64"
    assert Requirement("tomli; python_version < '3.11'").marker.evaluate(markers) is False  # type: ignore[union-attr]


def test_check_passes_where_ablate_is_installed(capsys: pytest.CaptureFixture[str]) -> None:
    class Args:
        extra = wheelhouse.MOTO_S3_SERVER

    assert wheelhouse.check(Args()) == 0
    assert "all requirements met" in capsys.readouterr().out
