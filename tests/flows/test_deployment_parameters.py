"""The deployment's parameters as the Prefect UI sees them: a form, validated at creation."""

from __future__ import annotations

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
