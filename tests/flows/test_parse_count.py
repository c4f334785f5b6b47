"""One parse of the plan per process in a local `ablate run` (#37, item 1).

The campaign process parses the plan once (the CLI) and hands the parsed campaign on; the slot
worker that writes the results parses its own copy from the folder; nothing else parses, reads
the plan file or checks the folder's registration again, and the campaign process takes the
results step's `Manifest` as it is returned instead of reading manifest.json back. Counted in
every process (and the user's code hashed once) by `tests/flows/parse_counter/sitecustomize.py`
(on PYTHONPATH, enabled by `ABLATE_PARSE_LOG`): the real campaign, nothing replaced. A failure
prints each call and its callers (`ablations.campaign.opening`: `admit`, then `open_campaign`)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.faults.conftest import Campaign
from tests.flows.conftest import TINY_PLAN

pytestmark = pytest.mark.slow

COUNTER = Path(__file__).with_name("parse_counter")


def _calls(log: Path) -> list[tuple[str, str, str]]:
    """(pid, what, callers) per counted call, in order."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [(pid, what, callers) for pid, what, callers in (line.split(" ", 2) for line in lines)]


# A campaign that fails or a counter that counts nothing is `pytest.fail`: the counts are
# what the assertions judge.
def test_one_parse_per_process(tmp_path: Path) -> None:
    log = tmp_path / "parses.log"
    campaign = Campaign(tmp_path / "c", TINY_PLAN, tmp_path / "prefect")
    pythonpath = os.pathsep.join([str(COUNTER), str(ROOT)])
    result = campaign.run(ABLATE_PARSE_LOG=str(log), PYTHONPATH=pythonpath)
    if result.returncode != 0:
        pytest.fail(f"the campaign failed:\n{result.stdout}{result.stderr}")
    calls = _calls(log)
    if not any(what == "parse" for _, what, _ in calls):
        pytest.fail(f"the counter counted no parse (is {COUNTER} on PYTHONPATH?): {calls}")
    trace = "\n".join(" ".join(call) for call in calls)
    processes = {pid for pid, what, _ in calls if what == "parse"}
    by_process = Counter((pid, what) for pid, what, _ in calls)
    cli = calls[0][0]  # the first to parse is the command line's process
    # Each process parses and reads the plan at most once: the CLI's and the results worker's.
    assert len(processes) <= 2, trace
    assert max(by_process[(pid, "parse")] for pid in processes) == 1, trace
    assert max(by_process[(pid, "read")] for pid in processes) <= 1, trace
    assert by_process[(cli, "registration")] == 1, trace
    assert by_process[(cli, "code")] <= 1, trace  # the user's code (up to 64 MiB) hashed once
    # The results step returns the manifest: the campaign process never reads it back.
    assert by_process[(cli, "manifest")] == 0, trace
