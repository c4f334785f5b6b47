"""Verdicts: what a campaign concluded about each variant, from its runs and its interval.

Every variant gets one verdict (`Verdict`, declared in `ablations.plan.section`), decided in
this order:

1. From its runs, when any main-phase run of it was not accepted: a configuration that fails
   on some seeds is not one to adopt, and that is a finding, not a missing number. The kind
   with the most seeds wins (ties: diverges, input truncated, fails threshold, failed):
   - `diverges`: stopped by the non-finite-loss rule;
   - `input truncated`: stopped by the truncation rule;
   - `fails threshold`: stopped by the quality rule, or rejected (final metric below it);
   - `failed`: crashed, or stopped because no usable restart existed.
   The note counts the seeds: "3/3 seeds stopped: non-finite loss at steps 4, 6, 5". An
   interval over the remaining pairs is still computed and shown.
2. `not run`: every main run was trimmed at the gate; the note names who trimmed it (the
   policy, a person in the UI, the policy after the UI timed out) and why. When its pilot runs
   were stopped or rejected, that is why it was trimmed: the verdict is the pilot's (as in 1,
   marked "in the pilot").
3. From the paired interval of variant - control (corrected across variants and looks:
   `ablations.analysis.sequential`), oriented so that a positive gain is better, against
   the useful-effect band [-u, +u] and the plan's `metric.decision_rule`:

   | interval of the gain [lo, hi]  | superiority  | non_inferiority | equivalence  |
   |--------------------------------|--------------|-----------------|--------------|
   | lo >= u                        | better       | better          | better       |
   | hi <= -u                       | worse        | worse           | worse        |
   | -u < lo and hi < u             | equivalent   | not worse       | equivalent   |
   | -u < lo < u <= hi              | inconclusive | not worse       | inconclusive |
   | lo <= -u < hi                  | inconclusive | inconclusive    | inconclusive |

   A variant with a seed seen to diverge (`ablations.analysis.stability`) gets no `better`,
   `not worse` or `equivalent` at that look; one still so at its last look is `unstable`.

   Superiority asks "usefully better?": anything short of lo >= u is not adopted, and an
   interval wholly inside the band is called `equivalent` (shown not to matter). Non-inferiority
   asks only "not usefully worse?": the lower end above -u suffices. Equivalence asks
   "interchangeable?": the whole interval inside the band. Fewer than two pairs give no
   interval: `inconclusive` (a single difference is shown, none is invented).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

import numpy as np

from ablations.plan.experiment import MetricSection
from ablations.plan.section import DecisionRule, Verdict
from ablations.run.records import RunRecord

VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
FAILURE_ORDER: tuple[Verdict, ...] = ("diverges", "input truncated", "fails threshold", "failed")
"""Run-derived verdicts, most telling first (breaks ties between equally many seeds)."""

STOP_WORDS: dict[str, tuple[Verdict, str]] = {
    "non_finite_loss": ("diverges", "non-finite loss"),
    "truncation": ("input truncated", "input truncated"),
    "quality": ("fails threshold", "quality below the threshold"),
    "restart": ("failed", "no usable restart"),
}
"""Stop rule -> (the variant's verdict, the rule in words)."""

TRIMMED_BY = {
    "auto": "by the gate's policy",
    "ui": "by a person at the gate",
    "timeout": "by the gate's policy after the UI timed out",
}


INTERVAL_VERDICTS: tuple[Verdict, ...] = (
    "inconclusive",
    "better",
    "worse",
    "not worse",
    "equivalent",
)
"""What an interval can conclude; `interval_verdicts` returns indices into it (0: no claim)."""


def interval_verdicts(low: np.ndarray, high: np.ndarray, metric: MetricSection) -> np.ndarray:
    """The verdicts of intervals of `variant - control` under the plan's decision rule, as
    indices into `INTERVAL_VERDICTS` (arrays of any shape; NaN ends give `inconclusive`)."""
    sign = 1.0 if metric.direction == "maximize" else -1.0
    gain_low = np.minimum(sign * low, sign * high)  # positive gain = better
    gain_high = np.maximum(sign * low, sign * high)
    u = metric.useful_effect
    rule: DecisionRule = metric.decision_rule
    codes = np.zeros(np.shape(gain_low), dtype=int)
    codes[gain_low >= u] = 1
    codes[(codes == 0) & (gain_high <= -u)] = 2
    if rule == "non_inferiority":
        codes[(codes == 0) & (gain_low > -u)] = 3
    else:
        codes[(codes == 0) & (gain_low > -u) & (gain_high < u)] = 4
    return codes


def interval_verdict(low: float, high: float, metric: MetricSection) -> Verdict:
    """The verdict of one interval of `variant - control` under the plan's decision rule."""
    code = interval_verdicts(np.array([low]), np.array([high]), metric)[0]
    return INTERVAL_VERDICTS[int(code)]


def _kind(record: RunRecord) -> tuple[Verdict, str, str]:
    """(verdict, group heading, detail) of one run that was not accepted."""
    if record.stop is not None:
        verdict, words = STOP_WORDS[record.stop.rule]
        pilot = record.checkpoint.pilot_step if record.phase == "main" else 0
        if record.stop.rule == "quality" and 0 < record.stop.step <= pilot:
            # where its pilot was judged, early in training: not a final result
            heading = f"stopped early (within the pilot's {pilot} steps, not a final result): "
            return verdict, heading + words, str(record.stop.step)
        return verdict, f"stopped: {words}", str(record.stop.step)
    if record.status == "rejected":
        why = record.rejection.message if record.rejection else "no acceptance reason recorded"
        return "fails threshold", "rejected", why
    why = f"{record.error.type}: {record.error.message}" if record.error else record.status
    return "failed", "failed", why


def runs_verdict(records: Sequence[RunRecord]) -> tuple[Verdict, str] | None:
    """The verdict and note of one variant's finished runs when any was not accepted.

    `records` are the variant's runs of one phase, trimmed ones excluded."""
    bad = [r for r in records if r.status not in ("accepted", "trimmed")]
    if not bad:
        return None
    n = len(records)
    groups: dict[tuple[Verdict, str], list[str]] = {}
    for record in sorted(bad, key=lambda r: r.seed):
        verdict, heading, detail = _kind(record)
        groups.setdefault((verdict, heading), []).append(detail)
    phrases = []
    for (_, heading), details in groups.items():
        k = len(details)
        if heading.startswith("stopped"):
            steps = "step" if k == 1 else "steps"
            phrases.append(f"{k}/{n} seeds {heading} at {steps} {', '.join(details)}")
        else:
            phrases.append(f"{k}/{n} seeds {heading}: {'; '.join(dict.fromkeys(details))}")
    counts: dict[Verdict, int] = {}
    for (verdict, _), details in groups.items():
        counts[verdict] = counts.get(verdict, 0) + len(details)
    chosen = max(FAILURE_ORDER, key=lambda v: (counts.get(v, 0), -FAILURE_ORDER.index(v)))
    return chosen, "; ".join(phrases)


def trimmed_note(source: str | None, reason: str | None) -> str:
    """Who trimmed a variant at the gate and why, in words."""
    who = TRIMMED_BY.get(source or "auto", f"at the gate ({source})")
    return f"trimmed {who}" + (f": {reason}" if reason else "")
