"""Budget and planning against rental packages: catalog, projection, cost, planned vs realized.

- `catalog`: the offers we know (and the plan's), resolved into a priced `Package`;
- `projection`: busy hours per run, LPT packing onto slots, the window fit;
- `estimate`: per-run estimates from the pilot's measured records;
- `cost`: cost per accepted result, undefined (never 0) when none is accepted;
- `assess`: a package judged against the work, with alternatives when it overruns;
- `realized`: the registered projection beside the realized times;
- `markdown`: the REPORT.md sections.
"""

from ablations.budget.assess import BudgetAssessment, Suggestion, assess_hours, assess_plan
from ablations.budget.catalog import CARDS_PER_LOT, CATALOG, Catalog, Package
from ablations.budget.cost import (
    CostSummary,
    accepted_results,
    cost_from_records,
    cost_summary,
    rejection_reasons,
)
from ablations.budget.estimate import estimate_from_records
from ablations.budget.markdown import budget_markdown, planned_vs_realized_markdown
from ablations.budget.projection import (
    Projection,
    RunProjection,
    WindowFit,
    fit_window,
    lpt_makespan,
    project,
    run_parts,
    slot_count,
)
from ablations.budget.realized import (
    PartDeviation,
    PlannedVsRealized,
    RunDeviation,
    planned_vs_realized,
)
from ablations.errors import BudgetError

__all__ = [
    "CARDS_PER_LOT",
    "CATALOG",
    "BudgetAssessment",
    "BudgetError",
    "Catalog",
    "CostSummary",
    "Package",
    "PartDeviation",
    "PlannedVsRealized",
    "Projection",
    "RunDeviation",
    "RunProjection",
    "Suggestion",
    "WindowFit",
    "accepted_results",
    "assess_hours",
    "assess_plan",
    "budget_markdown",
    "cost_from_records",
    "cost_summary",
    "estimate_from_records",
    "fit_window",
    "lpt_makespan",
    "planned_vs_realized",
    "planned_vs_realized_markdown",
    "project",
    "rejection_reasons",
    "run_parts",
    "slot_count",
]
