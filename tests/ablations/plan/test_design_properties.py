"""No internal error from any seed design: `ablate validate` and `ablate plan` of the demo plan
with `seeds` replaced by whatever hypothesis draws (lists, designs with any mix of keys and
values) exit 0, or 2 with each problem on a line naming its field; never an internal error."""

from __future__ import annotations

import copy
import io
import re
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ablations.cli import main
from tests.conftest import DEMO_PLAN

DEMO = yaml.safe_load(DEMO_PLAN.read_text())
PROBLEM = re.compile(r"^  ([A-Za-z_][\w.\[\]=-]*: \S|[a-z][^:]*[ :])")
"""A problem line of a PlanError: its field path, then what is wrong; or, for the plan as a
whole, what is wrong alone (lowercase words, never a literal `<plan>`)."""

numbers = st.one_of(
    st.integers(min_value=-5, max_value=40),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
)
values = st.one_of(
    numbers, st.none(), st.booleans(), st.text(max_size=8), st.lists(numbers, max_size=6)
)
looks = st.one_of(st.lists(st.integers(min_value=-2, max_value=30), max_size=25), values)
designs = st.fixed_dictionaries(
    {},
    optional={
        "start": values,
        "max": st.one_of(values, st.integers(min_value=1, max_value=20_000)),
        "looks": looks,
        "first": values,
        "alpha": values,
        "spending": st.one_of(
            st.sampled_from(["haybittle_peto", "obrien_fleming", "pocock", "equal"]), values
        ),
        "expected_sd": values,
        "unknown": values,
    },
)
small = st.integers(min_value=-1, max_value=14)
plausible = st.fixed_dictionaries(
    {"start": small, "max": small},
    optional={
        "looks": st.lists(small, max_size=6),
        "first": st.integers(min_value=-1, max_value=2**32),
        "alpha": st.sampled_from([0.0, 0.01, 0.05, 0.2, 0.5]),
        "spending": st.sampled_from(["haybittle_peto", "obrien_fleming", "pocock", "equal"]),
        "expected_sd": st.sampled_from([0.0, 0.01, -1.0]),
    },
)
"""Designs close to valid ones, where the cross-field checks (looks against start and max)
are reached."""
seeds = st.one_of(
    plausible,
    designs,
    st.lists(st.integers(min_value=-3, max_value=2**33), max_size=30),
    st.lists(values, max_size=5),
    values,
)


def _ablate(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seeds=seeds)
def test_any_seed_design_is_valid_or_refused_naming_the_field(seeds: Any) -> None:
    data = copy.deepcopy(DEMO)
    data["seeds"] = seeds
    with tempfile.TemporaryDirectory() as folder:
        plan = Path(folder) / "plan.yaml"
        plan.write_text(yaml.safe_dump(data))
        for command in ("validate", "plan"):
            code, out, err = _ablate(command, str(plan))
            assert "internal error" not in err and "Traceback" not in err + out, err
            assert code in (0, 2), (code, err)
            if code == 0:
                assert command != "validate" or out.startswith(f"{plan}: valid")
                continue
            assert err.startswith(f"error: {plan}: invalid plan"), err
            problems = err.splitlines()[1:]
            assert problems and all(PROBLEM.match(line) for line in problems), err
            assert "valid\n" not in out  # never "valid" for a plan it refuses
            break  # `plan` refuses what `validate` refused
