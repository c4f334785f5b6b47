"""Budget: catalog, window fit, LPT projection, pilot estimates, cost, planned vs realized."""

from __future__ import annotations

from typing import Any

import pytest

from ablations.budget import (
    BudgetError,
    Catalog,
    Package,
    accepted_results,
    assess_hours,
    assess_plan,
    budget_markdown,
    cost_from_records,
    cost_summary,
    estimate_from_records,
    fit_window,
    lpt_makespan,
    planned_vs_realized,
    planned_vs_realized_markdown,
    project,
    slot_count,
)
from ablations.budget.markdown import cost_lines
from ablations.plan.model import Plan, parse_plan, plan_hash
from ablations.plan.offers import Cost, Offer, PackageSection, RunEstimate
from ablations.plan.runs import planned_runs
from ablations.run.records import CheckpointSummary, RunRecord, Stop, Timings

RTX = PackageSection(gpu="RTX 4090", lots=1, days=3)


def rtx(lots: int = 1, days: int = 3) -> Package:
    return Catalog().resolve(PackageSection(gpu="RTX 4090", lots=lots, days=days))


def record(run_id: str, phase: str = "main", status: str = "accepted", **kw: Any) -> RunRecord:
    return RunRecord.model_validate(
        {
            "run_id": run_id,
            "variant": "control",
            "seed": 0,
            "category": "essential",
            "phase": phase,
            "status": status,
            **kw,
        }
    )


def plan_from(demo: dict[str, Any], *, step: float, days: int = 3, **budget: Any) -> Plan:
    """The demo plan with 100 main / 40 pilot steps, no checkpoints and only step time."""
    demo["workload"]["steps"] = 100
    demo["pilot"]["steps"] = 40
    demo["checkpoint"]["interval"] = {"steps": 1000}  # no saves in 100 steps
    demo["budget"] = {
        "package": {"gpu": "RTX 4090", "lots": 1, "days": days},
        "prep_hours": 2,
        "estimate": {
            "load_seconds": 0,
            "step_seconds": step,
            "eval_seconds": 0,
            "checkpoint_seconds": 0,
            "export_seconds": 0,
        },
        **budget,
    }
    return parse_plan(demo)


# -- the guide's own figures ------------------------------------------------------------------


def test_48_busy_hours_in_a_72_hour_window_leave_24_unused() -> None:
    fit = fit_window(48.0, 0.0, rtx().window_hours)
    assert fit.window_hours == 72.0 and fit.fits
    assert fit.unused_hours == pytest.approx(24.0) and fit.overrun_hours == 0.0


def test_78_hours_exceed_3_days_by_6_and_point_to_the_7_day_package() -> None:
    a = assess_hours(rtx(), 78.0)
    assert not a.fit.fits and a.fit.overrun_hours == pytest.approx(6.0)
    assert a.fit.unused_hours == 0.0
    [s] = a.suggestions
    assert (s.kind, s.days, s.fits) == ("package", 7, True)
    assert s.price_usd == pytest.approx(110.0) and s.unused_hours == pytest.approx(90.0)


def test_two_3_day_rtx_4090_lots_cost_94_28() -> None:
    package = rtx(lots=2)
    assert package.price_usd == pytest.approx(94.28) and package.cards == 2
    assert round(cost_summary(package).package_usd or 0, 2) == 94.28


def test_47_14_over_2_accepted_is_23_57_each() -> None:
    cost = cost_summary(rtx(), accepted=2)
    assert cost.cost_per_accepted_usd == pytest.approx(23.57)
    assert "23.57 USD (47.14 USD over 2 accepted)" in "\n".join(
        budget_markdown(assess_hours(rtx(), 10, accepted=2)).splitlines()
    )


def test_zero_accepted_is_undefined_with_the_spend_and_reasons_shown() -> None:
    stopped = record(
        "a-s0-1",
        status="stopped",
        stop=Stop(rule="quality", message="accuracy 0.4 < 0.85", step=150),
    )
    cost = cost_from_records(rtx(), [Cost(name="storage", usd=2.86)], [stopped])
    assert cost.accepted == 0 and cost.cost_per_accepted_usd is None
    assert cost.total_usd == pytest.approx(50.0) and cost.undefined_reason == "no run was accepted"
    assert cost.rejections == [
        "a-s0-1 (control, seed 0, main): stopped, quality at step 150: accuracy 0.4 < 0.85"
    ]
    text = "\n".join(cost_lines(cost))
    assert "Cost per accepted result: undefined (no run was accepted)" in text
    assert "Spent without an accepted result: 50.00 USD" in text
    assert "accuracy 0.4 < 0.85" in text
    assert " 0.00 USD" not in text and ": 0" not in text


def test_a_b200_lots_two_cards_are_priced_once() -> None:
    catalog = Catalog([Offer(gpu="B200", days=7, price_usd=900.0)])  # no cards_per_lot given
    one = catalog.resolve(PackageSection(gpu="B200", lots=1, days=7))
    assert (one.cards_per_lot, one.cards, one.price_usd) == (2, 2, 900.0)
    two = catalog.resolve(PackageSection(gpu="b200", lots=2, days=7))
    assert (two.cards, two.price_usd) == (4, 1800.0)
    assert cost_summary(one, accepted=2).cost_per_accepted_usd == pytest.approx(450.0)


# -- catalog -----------------------------------------------------------------------------------


def test_catalog_holds_only_the_known_prices() -> None:
    assert [(p.days, p.price_per_lot_usd) for p in Catalog().offers_for("rtx4090")] == [
        (3, 47.14),
        (7, 110.0),
        (30, 390.0),
    ]
    assert Catalog().offers_for("B200") == []  # lot size known, price not


def test_unknown_price_is_none_and_no_cost_is_shown() -> None:
    b200 = Catalog().resolve(PackageSection(gpu="B200", lots=1, days=3))
    assert b200.price_usd is None and b200.cards == 2
    cost = cost_summary(b200, [Cost(name="storage", usd=5)], accepted=3)
    assert cost.total_usd is None and cost.cost_per_accepted_usd is None
    assert "not known" in (cost.undefined_reason or "")
    five_days = rtx(days=5)
    assert five_days.price_usd is None and five_days.price_source is None


def test_plan_offers_override_and_add() -> None:
    catalog = Catalog(
        [
            Offer(gpu="RTX 4090", days=3, price_usd=40.0),
            Offer(gpu="H100", days=7, price_usd=700.0, cards_per_lot=1),
            Offer(gpu="B200", days=3, price_usd=500.0, cards_per_lot=1),
        ]
    )
    assert catalog.resolve(RTX).price_usd == 40.0
    assert catalog.resolve(RTX).price_source == "offer"
    assert catalog.resolve(PackageSection(gpu="H100", days=7)).price_usd == 700.0
    assert catalog.resolve(PackageSection(gpu="B200", days=3)).cards_per_lot == 1  # explicit
    own = catalog.resolve(PackageSection(gpu="RTX 4090", days=3, price_usd=45.5))
    assert (own.price_usd, own.price_source) == (45.5, "plan")


def test_unknown_gpu_without_price_names_the_known_ones() -> None:
    with pytest.raises(BudgetError, match=r"unknown GPU 'H100'.*B200, RTX 4090"):
        Catalog().resolve(PackageSection(gpu="H100"))
    priced = Catalog().resolve(PackageSection(gpu="H100", price_usd=80.0, lots=3))
    assert (priced.cards, priced.price_usd) == (3, 240.0)


# -- window fit and projection -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("wall", "prep", "fits", "unused", "overrun"),
    [(70.0, 2.0, True, 0.0, 0.0), (71.0, 2.0, False, 0.0, 1.0), (60.0, 2.0, True, 10.0, 0.0)],
)
def test_fit_adds_prep_once(
    wall: float, prep: float, fits: bool, unused: float, overrun: float
) -> None:
    fit = fit_window(wall, prep, 72.0)
    assert (fit.fits, fit.unused_hours, fit.overrun_hours) == (
        fits,
        pytest.approx(unused),
        pytest.approx(overrun),
    )


def test_lpt_packs_whole_runs_not_total_over_slots() -> None:
    assert lpt_makespan([3, 3, 2, 2, 2], 2) == 7  # total / slots would say 6
    assert lpt_makespan([5, 1, 1, 1, 1, 1], 2) == 5
    assert lpt_makespan([2, 2], 8) == 2 and lpt_makespan([], 3) == 0
    with pytest.raises(ValueError, match="slots"):
        lpt_makespan([1], 0)


def test_project_counts_every_part_and_phase(demo_data: dict[str, Any]) -> None:
    demo_data["workload"]["steps"] = 100  # eval_every 50: 2 evaluations
    demo_data["pilot"]["steps"] = 40  # 1 evaluation (the last step), 1 save
    demo_data["checkpoint"]["interval"] = {"steps": 25}  # 4 saves in a main run
    demo_data["resources"]["devices"] = 2
    plan = parse_plan(demo_data)
    runs = planned_runs(plan, plan_hash(plan))
    estimate = RunEstimate(
        load_seconds=10, step_seconds=1, eval_seconds=5, checkpoint_seconds=2, export_seconds=3
    )
    p = project(plan, runs, estimate, slot_count(plan, cards=1))
    # main run: 10 + 100x1 + 2x5 + 4x2 + 3 = 131 s; pilot run: 10 + 40 + 5 + 2 + 3 = 60 s;
    # a main run resumed from its pilot trains the other 60 steps: 10 + 60 + 2x5 + 2x2 + 3 = 87 s
    assert p.slots == 2
    assert p.phase_hours == {
        "pilot": pytest.approx(120 / 3600),
        "main": pytest.approx(1135 / 3600),  # 15 x 131 + 3 x 87 packed longest first on 2
    }
    assert p.wall_hours == pytest.approx(1255 / 3600)
    assert p.busy_hours == pytest.approx((15 * 131 + 3 * 87 + 3 * 60) / 3600)
    assert p.category_hours == {
        "essential": pytest.approx((6 * 131 + 3 * 87 + 3 * 60) / 3600),
        "useful": pytest.approx(6 * 131 / 3600),
        "exploratory": pytest.approx(3 * 131 / 3600),
    }
    assert p.part_hours["checkpoint"] == pytest.approx((15 * 8 + 3 * 4 + 3 * 2) / 3600)
    assert p.window_hours == 72 and p.prep_hours == 2 and p.fits
    assert p.unused_hours == pytest.approx(72 - 2 - 1255 / 3600)


def test_slots_follow_the_cards_unless_the_plan_pins_devices(demo_data: dict[str, Any]) -> None:
    demo_data["resources"] = {"devices": "auto", "slots_per_device": 2}
    assert slot_count(parse_plan(demo_data), cards=4) == 8
    demo_data["resources"] = {"devices": ["cuda:0", "cuda:1", "cuda:2"]}
    assert slot_count(parse_plan(demo_data), cards=4) == 3


def test_plan_overrun_suggests_longer_package_more_lots_and_cuts(
    demo_data: dict[str, Any],
) -> None:
    # main run 100 x 72 s = 2 h (1.2 h after its pilot), pilot run 0.8 h, one slot, 1-day
    # window (price unknown)
    a = assess_plan(plan_from(demo_data, step=72, days=1))
    assert a.fit.wall_hours == pytest.approx(15 * 2 + 3 * 1.2 + 3 * 0.8)
    assert a.fit.overrun_hours == pytest.approx(36 + 2 - 24)
    assert a.cost.package_usd is None
    by_kind = {s.kind: s for s in a.suggestions}
    assert (by_kind["package"].days, by_kind["package"].price_usd) == (3, pytest.approx(47.14))
    lots = by_kind["lots"]  # 2 slots: 8 x 2 h + 1.2 h (LPT) + 2 x 0.8 h
    assert (lots.lots, lots.price_usd) == (2, None)
    assert lots.wall_hours == pytest.approx(18.8)
    cut = by_kind["cut"]  # exploratory alone leaves 32 h; with useful: 6 x 2 + 3.6 + 2.4 + 2 = 20
    assert cut.cut == ["exploratory", "useful"] and cut.fits
    assert cut.unused_hours == pytest.approx(4.0)


def test_plan_cut_that_still_overruns_says_so(demo_data: dict[str, Any]) -> None:
    a = assess_plan(plan_from(demo_data, step=360))  # 10 h per main run on one slot
    assert a.fit.overrun_hours == pytest.approx(150 + 3 * 6 + 12 + 2 - 72)
    by_kind = {s.kind: s for s in a.suggestions}
    assert by_kind["package"].days == 30 and by_kind["package"].price_usd == pytest.approx(390)
    assert by_kind["lots"].lots == 3 and by_kind["lots"].price_usd == pytest.approx(141.42)
    assert not by_kind["cut"].fits and "still 20.0 h over" in by_kind["cut"].text
    assert a.fits_with_margin is False


# -- pilot estimates ---------------------------------------------------------------------------


def test_estimate_uses_measured_totals_not_one_warm_step(demo_data: dict[str, Any]) -> None:
    plan = parse_plan(demo_data)
    pilot = [
        record(
            "p1",
            "pilot",
            steps_done=100,
            step_seconds=0.01,
            timings=Timings(load=2, train=50, evaluate=3, checkpoint=4, export=1),
            evaluations=[{"step": 50}, {"step": 100}],
            checkpoint=CheckpointSummary(saves=2),
        ),
        record(
            "p2",
            "pilot",
            status="stopped",
            steps_done=50,
            step_seconds=0.01,
            timings=Timings(load=4, train=40, evaluate=3, checkpoint=0, export=3),
            evaluations=[{"step": 50}],
        ),
        record("p3", "pilot", status="failed", timings=Timings(load=100)),  # never trained
    ]
    e = estimate_from_records(pilot, plan)
    assert (
        e.load_seconds,
        e.step_seconds,
        e.eval_seconds,
        e.checkpoint_seconds,
        e.export_seconds,
    ) == (3.0, pytest.approx(0.6), 2.0, 2.0, 2.0)
    # scaled to the main phase's 300 steps, not the pilot's 100 (200 after a pilot's 100)
    main = [r for r in planned_runs(plan, plan_hash(plan)) if r.phase == "main"]
    unpiloted = next(r for r in main if r.pilot is None)
    assert project(plan, [unpiloted], e, 1).runs[0].parts["train"] == pytest.approx(180.0)
    assert project(plan, main[:1], e, 1).runs[0].parts["train"] == pytest.approx(120.0)


def test_estimate_falls_back_to_the_plan_for_what_was_not_measured(
    demo_data: dict[str, Any],
) -> None:
    plan = plan_from(demo_data, step=7)
    assert estimate_from_records([], plan) == plan.budget.estimate
    e = estimate_from_records([record("p", "pilot", steps_done=10, timings=Timings(train=5))], plan)
    assert e.step_seconds == 0.5 and e.checkpoint_seconds == 0.0  # plan's value, no save seen


def test_assess_plan_projects_from_pilot_records(demo_data: dict[str, Any]) -> None:
    plan = plan_from(demo_data, step=1)
    pilot = [record("p", "pilot", steps_done=40, timings=Timings(train=40 * 36.0))]
    a = assess_plan(plan, records=pilot)
    assert a.source == "pilot records"
    assert a.projection is not None and a.projection.estimate.step_seconds == 36.0
    # 100 x 36 s = 1 h per main run, 0.6 h for one resumed from its pilot's 40 steps
    assert a.fit.wall_hours == pytest.approx(15 * 1 + 3 * 0.6 + 3 * 0.4)
    assert a.cost.accepted == 0 and a.cost.cost_per_accepted_usd is None  # pilot isn't a result


# -- accepted results --------------------------------------------------------------------------


def test_retimed_runs_do_not_make_more_results() -> None:
    records = [
        record("main-a"),
        record("main-a"),  # the same run re-run to time it
        record("main-b", status="rejected"),
        record("pilot-a", "pilot"),
    ]
    assert accepted_results(records) == 1
    assert cost_from_records(rtx(), [], records).cost_per_accepted_usd == pytest.approx(47.14)


# -- planned vs realized -----------------------------------------------------------------------


def test_planned_vs_realized_keeps_the_projection_and_the_deviations(
    demo_data: dict[str, Any],
) -> None:
    plan = plan_from(demo_data, step=36)  # 1 h per main run
    runs = planned_runs(plan, plan_hash(plan))
    registered = project(plan, runs, plan.budget.estimate, 1)
    main = [r for r in runs if r.phase == "main" and r.pilot is None]  # 1 h each
    a, b, trimmed = main[0], main[1], main[2]
    records = [
        record(a.run_id, timings=Timings(train=5400), started_at=0.0, ended_at=5400.0),
        record(
            b.run_id, timings=Timings(load=1800, train=1800), started_at=5400.0, ended_at=9000.0
        ),
        record("extra-s0-x", timings=Timings(train=36)),
    ]
    pvr = planned_vs_realized(
        registered, records, ["trim: dropped exploratory runs"], trimmed=[trimmed.run_id]
    )
    assert pvr.planned == registered  # unchanged
    assert pvr.realized_busy_hours == pytest.approx(2.51)
    assert pvr.realized_wall_hours == pytest.approx(2.5)
    rows = {r.run_id: r for r in pvr.runs}
    assert rows[a.run_id].deviation_hours == pytest.approx(0.5)
    assert rows[b.run_id].deviation_hours == pytest.approx(0.0)
    assert rows[trimmed.run_id].status == "trimmed" and rows[trimmed.run_id].realized_hours is None
    assert rows[main[3].run_id].status == "pending"
    parts = {d.part: d for d in pvr.parts}
    assert parts["train"].planned_hours == pytest.approx(2.0)
    assert parts["train"].realized_hours == pytest.approx(2.0)
    assert parts["load"].deviation_hours == pytest.approx(0.5)
    assert pvr.compared_planned_hours == pytest.approx(2.0)
    assert pvr.unspent_planned_hours == pytest.approx(13 + 3 * 0.6 + 3 * 0.4)
    assert pvr.unplanned == ["extra-s0-x"]
    text = planned_vs_realized_markdown(pvr)
    assert "| load | 0 s | 30.0 min | +30.0 min |" in text
    # A deviation above 20% is explained from the measured parts; one within 20% is not.
    assert (
        f"| `{a.run_id}` | control | main | accepted | 1.00 h | 1.50 h | +30.0 min | "
        "train 1.5x the estimate |"
    ) in text
    assert f"| `{b.run_id}` | control | main | accepted | 1.00 h | 1.00 h | +0 s |  |" in text
    assert "deviation +30.6 min; load 30.0 min not in the estimate" in text
    assert "- trim: dropped exploratory runs" in text
    # it round-trips through manifest.json as plain JSON
    assert type(pvr).model_validate_json(pvr.model_dump_json()) == pvr


def test_a_run_resumed_from_its_pilot_is_timed_over_the_steps_it_trained(
    demo_data: dict[str, Any],
) -> None:
    from ablations.run.records import CheckpointSummary

    plan = plan_from(demo_data, step=7)
    resumed = record(
        "m",
        steps_done=100,
        timings=Timings(train=30),
        checkpoint=CheckpointSummary(resumed_from_step=40),
    )
    assert resumed.steps_trained == 60
    # 30 s over the 60 steps it trained, not over the 100 it reached
    assert estimate_from_records([resumed], plan).step_seconds == pytest.approx(0.5)
