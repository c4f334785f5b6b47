"""ablate: ablation campaigns that end in a decision. The domain layer; runs without Prefect.

The names a user's training code needs are imported from here, whatever module defines them
today (optuna's pattern: a refactor moves a module, never a public name)::

    from ablations import Evaluation, InputGroup, InputReport   # a workload's records
    from ablations import ResumableLoader, TERMINATE

Each is imported on first use (module `__getattr__`), so `import ablations` (what `ablate`
pays before it parses its arguments) loads neither torch nor the adapters.
`tests/ablations/test_public.py` pins the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ablations.lazy import lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:  # what a type checker (and an editor) sees; at run time `__getattr__`
    from ablations.byo import ExternalWorkload as ExternalWorkload
    from ablations.byo.data import ResumableLoader as ResumableLoader
    from ablations.byo.session import Reply as Reply
    from ablations.byo.session import Session as Session
    from ablations.process.preemption import TERMINATE as TERMINATE
    from ablations.process.preemption import TerminateRequest as TerminateRequest
    from ablations.run.records import RunSpec as RunSpec
    from ablations.run.workload import (
        DataProblem as DataProblem,
    )
    from ablations.run.workload import (
        Evaluation as Evaluation,
    )
    from ablations.run.workload import (
        InputGroup as InputGroup,
    )
    from ablations.run.workload import (
        InputReport as InputReport,
    )
    from ablations.run.workload import (
        Predictions as Predictions,
    )
    from ablations.run.workload import (
        Split as Split,
    )
    from ablations.run.workload import (
        Splits as Splits,
    )
    from ablations.run.workload import (
        Workload as Workload,
    )
    from ablations.run.workload import (
        WorkloadFactory as WorkloadFactory,
    )

_PUBLIC: dict[str, str] = {
    # the workload protocol (`workload.entry` naming a class with `build`) and its records
    "Workload": "ablations.run.workload",
    "WorkloadFactory": "ablations.run.workload",
    "Evaluation": "ablations.run.workload",
    "Predictions": "ablations.run.workload",
    "InputGroup": "ablations.run.workload",
    "InputReport": "ablations.run.workload",
    "Split": "ablations.run.workload",
    "Splits": "ablations.run.workload",
    "DataProblem": "ablations.run.workload",
    # a loader that resumes mid-epoch (Lightning, or any loop of your own)
    "ResumableLoader": "ablations.byo.data",
    # the preemption flag a loop of its own polls
    "TERMINATE": "ablations.process.preemption",
    "TerminateRequest": "ablations.process.preemption",
    # an adapter of your own: `run_external(spec, session)`, what it is given and answered
    "ExternalWorkload": "ablations.byo",
    "RunSpec": "ablations.run.records",
    "Session": "ablations.byo.session",
    "Reply": "ablations.byo.session",
}
"""Public name -> the module that defines it now."""

__all__ = ["__version__", *_PUBLIC]


__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC, globals())
