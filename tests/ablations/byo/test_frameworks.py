"""The framework versions of an adapter's runs: recorded in `RunEnvironment.frameworks` (left
out of the JSON when empty, so a built-in run's record and manifest row are as before) and
shown in REPORT.md's head."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablations.byo import framework_versions
from ablations.report import ReportInputs
from ablations.report.markdown import render_report
from ablations.run.records import RunEnvironment
from tests.ablations.analysis.synthetic import write_synthetic
from tests.ablations.report.test_report import inputs_of


def test_an_empty_frameworks_field_leaves_the_json_as_it_was() -> None:
    bare = RunEnvironment(torch="2.13.0", device_name="cpu")
    assert json.loads(bare.model_dump_json()) == {
        "torch": "2.13.0", "cuda": None, "device_name": "cpu", "data_sha256": None
    }  # fmt: skip
    given = RunEnvironment(torch="2.13.0", device_name="cpu", frameworks={"lightning": "2.6.6"})
    assert json.loads(given.model_dump_json())["frameworks"] == {"lightning": "2.6.6"}
    assert RunEnvironment.model_validate_json(given.model_dump_json()) == given
    assert RunEnvironment.model_validate_json(bare.model_dump_json()) == bare


def test_only_the_frameworks_loaded_are_recorded() -> None:
    class Adapter:
        frameworks = ("pytest", "a_package_never_imported")

    assert framework_versions(Adapter) == {"pytest": pytest.__version__}
    assert framework_versions(object()) == {}  # an entry that names none


@pytest.fixture
def inputs(tmp_path: Path) -> ReportInputs:
    return inputs_of(tmp_path, write_synthetic(tmp_path))


def test_the_report_names_the_frameworks_the_runs_recorded(inputs: ReportInputs) -> None:
    assert "**Frameworks.**" not in render_report(inputs)  # a built-in workload's report
    runs = []
    for run in inputs.runs:
        if run.record is None:
            runs.append(run)
            continue
        version = "5.25.0" if runs else "4.46.0"  # two versions in one campaign: both named
        frameworks = {"transformers": version, "peft": "0.21.2"}
        environment = RunEnvironment(torch="2.13.0", device_name="cpu", frameworks=frameworks)
        record = run.record.model_copy(update={"environment": environment})
        runs.append(run.model_copy(update={"record": record}))
    markdown = render_report(inputs.model_copy(update={"runs": runs}))
    line = "**Frameworks.** peft 0.21.2, transformers 4.46.0 / 5.25.0 (as the runs imported them)."
    assert line in markdown
