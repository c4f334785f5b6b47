"""bench/serve_memory.py's bombs, handled as `ablate serve` handles a pasted form, in a fresh
interpreter: the serve process names the flow run (`opening.run_name`), the flow run admits
the plan (`flows.boundary.admitted`); each bomb is refused in one line and the process's peak
resident memory grows by less than `GROWTH_MB` over all of them (the issue: 184 -> 5 066 MB).
The bench measures the real `ablate serve` under a Prefect server; this pins the reader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.bench.scripts import load
from tests.conftest import ROOT

bench = load("serve_memory")

GROWTH_MB = 64
"""Peak RSS growth allowed over every bomb: the reader's caps (1 MiB of text, 4 MiB of
expanded scalars) with the parser's own copies, far below a bomb's gigabytes."""

PROBE = """
import json, resource, sys
from pathlib import Path
from ablations.campaign.opening import one_line, run_name
from ablations.errors import InputError
from flows.boundary import admitted

texts = {p.stem: p.read_text() for p in sorted(Path(sys.argv[1]).glob("*.yaml"))}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
outcome = {}
for name, text in texts.items():
    named = run_name(text, "")
    try:
        admitted("", text, sys.argv[2])
        outcome[name] = [named, "admitted"]
    except InputError as exc:
        outcome[name] = [named, one_line(exc)]  # the state message
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"growth_kb": after - before, "outcome": outcome}))
"""


def test_every_bomb_is_refused_within_the_memory_bound(tmp_path: Path) -> None:
    bombs = bench.bombs()
    names = {}
    for number, (name, text) in enumerate(bombs.items()):
        (tmp_path / f"{number}.yaml").write_text(text)
        names[str(number)] = name
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path), str(tmp_path / "out")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout.splitlines()[-1])
    assert found["growth_kb"] < GROWTH_MB * 1024, found["growth_kb"]
    for key, (named, refusal) in found["outcome"].items():
        assert named.startswith("invalid"), (names[key], named)
        assert refusal != "admitted" and "\n" not in refusal and len(refusal) < 600, names[key]
    assert not (tmp_path / "out").exists()  # admitted nothing, wrote nothing


def test_the_api_refuses_the_bombs_over_its_limit_before_serve_sees_them() -> None:
    """What the bench reports as refused by Prefect: bigger than its parameter limit."""
    over = {name for name, text in bench.bombs().items() if len(text) > bench.API_LIMIT_BYTES}
    assert over == {"alias 900 KB x 1 000", "8 MB plan"}
