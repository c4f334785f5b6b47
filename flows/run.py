"""The `run` flow: one run (or the preflight) on a slot of the worker's host.

Deployed on a process work pool by prefect.yaml as `run/<pool>`; `ablate run --pool`
submits it once per run (ablations/pool/attempts.py). Each flow run is its own process on the
host of the worker that picked it up, and leases one of that host's slots there.
"""

import json
from typing import Any, Literal

from prefect import flow
from prefect.runtime import flow_run

from ablations.pool.attempts import run_on_host
from ablations.run.records import RunSpec


# Named by the campaign as it submits the run (`flows.pool.flow_run_name`): a name computed
# here is one more request to the server at each run's start.
@flow(name="run", persist_result=False, log_prints=False)
def one_run(
    spec: RunSpec,
    kind: Literal["run", "preflight"] = "run",
    expected_inputs: dict[str, int] | None = None,
    attempt: str | None = None,
) -> dict[str, Any]:
    """Run one registered run on this host; its record also lands next to its checkpoints.

    `attempt` is the id the campaign accepted for this submission; only the accepted attempt
    commits (None: the flow run's id, which no campaign accepted, so such a run started by
    hand trains but commits nothing)."""
    result = run_on_host(spec, kind, expected_inputs, attempt=attempt or str(flow_run.get_id()))
    parsed: dict[str, Any] = json.loads(result)
    return parsed
