"""The deployment's parameters as the Prefect UI sees them: a form, validated at creation."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from flows.campaign import ablation_campaign


def test_parameters_validate_as_a_deployment_would() -> None:
    # A served deployment loads the flow from its entrypoint and validates the parameters
    # against its signature; string annotations (from __future__) once broke this with
    # "model is not fully defined".
    from prefect.flows import load_flow_from_entrypoint

    loaded = load_flow_from_entrypoint("flows/campaign.py:ablation_campaign")
    params = loaded.validate_parameters(
        {"plan_path": "plan.yaml", "out_dir": "out", "gate": "ui", "devices": "2"}
    )
    assert params["gate"] == "ui" and params["devices"] == "2"
    with pytest.raises(Exception, match="gate"):
        loaded.validate_parameters({"plan_path": "p", "gate": "sometimes"})


def test_parameter_schema_renders_a_form() -> None:
    from prefect.utilities.callables import parameter_schema

    schema = parameter_schema(ablation_campaign.fn).model_dump()
    assert {"plan_path", "plan_yaml", "out_dir", "gate", "devices"} <= set(schema["properties"])


def test_every_parameter_is_described_and_gate_is_a_select() -> None:
    from flows.serve import campaign_deployment

    # What the deployment sends to the server (RunnerDeployment keeps it private).
    schema = campaign_deployment("ablate")._parameter_openapi_schema.model_dump()
    properties = schema["properties"]
    assert set(properties) == set(inspect.signature(ablation_campaign.fn).parameters)
    undescribed = [name for name, field in properties.items() if not field.get("description")]
    assert not undescribed
    assert properties["gate"]["enum"] == ["plan", "auto", "ui"]
    assert not [name for name, field in properties.items() if "anyOf" in field]  # no null toggles
    assert "working directory" in properties["plan_path"]["description"]


def test_the_served_entrypoint_is_absolute_and_loads_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect.flows import load_flow_from_entrypoint

    from flows.serve import campaign_deployment

    monkeypatch.chdir(tmp_path)
    entrypoint = campaign_deployment("ablate").entrypoint
    assert entrypoint is not None and Path(entrypoint.split(":")[0]).is_absolute()
    assert load_flow_from_entrypoint(entrypoint).name == "ablation-campaign"


def test_flow_runs_are_named_after_the_campaign_or_say_the_input_is_invalid(
    tmp_path: Path,
) -> None:
    from ablations.campaign.opening import run_name
    from tests.flows.conftest import TINY_PLAN, plan_text

    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_text(TINY_PLAN))
    assert run_name("", str(plan)) == "tiny"
    assert run_name(plan_text(TINY_PLAN).replace("id: tiny", "id: pasted"), str(plan)) == "pasted"
    assert run_name("campaign: {id: pasted}\n", "") == "invalid plan: pasted"
    assert run_name("", str(tmp_path / "missing.yaml")) == "invalid: unreadable plan_path"
    assert run_name("", "") == "invalid: no plan"


def test_the_form_says_which_plan_field_is_required_and_keeps_its_placeholders() -> None:
    from flows.serve import campaign_deployment

    properties = campaign_deployment("ablate")._parameter_openapi_schema.model_dump()["properties"]
    assert properties["plan_path"]["description"].startswith("Required unless plan_yaml")
    assert properties["plan_yaml"]["description"].startswith("Required unless plan_path")
    assert "`run/<pool>`" in properties["pool"]["description"]  # a code span: shown as is


def test_serve_names_a_new_run_after_its_campaign_before_any_runner_picks_it_up(
    prefect_server: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run created from the deployment (as the UI's Run button does) has the server's random
    name; `ablate serve`'s namer gives it the campaign's within a second, while it is still
    scheduled (no runner here picks it up), and a plan_path outside the roots is not read."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    from flows.boundary import ENTRIES_ENV, ROOTS_ENV, STORES_ENV, Boundary
    from flows.run_names import OUTSIDE, RunNamer
    from flows.serve import campaign_deployment
    from tests.flows.conftest import TINY_PLAN, plan_text

    for name in (ROOTS_ENV, ENTRIES_ENV, STORES_ENV):
        monkeypatch.setenv(name, "")  # undone after the test
    root = tmp_path / "root"
    root.mkdir()
    Boundary.of([root], []).install()
    plan = root / "plan.yaml"
    plan.write_text(plan_text(TINY_PLAN))
    outside = tmp_path / "secret.yaml"
    outside.write_text(plan_text(TINY_PLAN).replace("id: tiny", "id: leaked"))
    campaign_deployment("names").apply()
    namer = RunNamer("ablation-campaign/names")
    namer.start()
    try:
        created = {
            "tiny": run_deployment(
                "ablation-campaign/names", parameters={"plan_path": str(plan)}, timeout=0
            ),
            OUTSIDE: run_deployment(
                "ablation-campaign/names", parameters={"plan_path": str(outside)}, timeout=0
            ),
        }
        started = time.monotonic()
        with get_client(sync_client=True) as client:
            while time.monotonic() - started < 10:
                names = {k: client.read_flow_run(r.id).name for k, r in created.items()}  # type: ignore[union-attr]
                if all(k == v for k, v in names.items()):
                    break
                time.sleep(0.1)
            waited = time.monotonic() - started
            states = [client.read_flow_run(r.id).state for r in created.values()]  # type: ignore[union-attr]
    finally:
        namer.stop()
    assert names == {"tiny": "tiny", OUTSIDE: OUTSIDE} and waited < 3
    assert all(s is not None and s.is_scheduled() for s in states)  # before any runner
