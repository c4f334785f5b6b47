"""The output contract's names: every file and folder of a campaign's output folder.

    from ablations.files.names import GATE, METRICS, run_file_names
    folder / GATE                          # DIR/gate.json
    run_file_names("r1")["steps"]          # "metrics/r1.steps.csv"

This module imports nothing of the project, so any module (a worker process, the probe, the
verifier) may take a name from it without pulling in what reads or writes the files
(`ablations.campaign.folder`, which re-exports every name here). The contract, who writes
each file and in what order, is in ARCHITECTURE.md.
"""

from __future__ import annotations

MANIFEST = "manifest.json"
"""The index of the folder: campaign, environment, gate, budget, one row per run, file hashes."""
PLAN = "plan.yaml"
"""The registered plan, byte for byte as given."""
REGISTRATION = "registration.json"
"""Campaign id, plan hash, when it was registered."""
PROJECTION = "projection.json"
"""The time and cost projection made at registration, kept as it was."""
PREFLIGHT = "preflight.json"
"""The preflight report (data check, restart check)."""
GATE = "gate.json"
"""The gate decision (asked once, never again; a `fix` is asked again after preflight)."""
LOOKS = "looks.json"
"""The main phase's looks as recorded, in order (each written once, never revisited)."""
REFRAME_DRAFT = "reframe-draft.yaml"
"""A draft plan for the revised question, when the gate reframed."""
RUNS_CSV = "runs.csv"
"""One flat row per registered run."""
REPORT = "REPORT.md"
REPORT_HTML = "REPORT.html"
"""REPORT.md as one self-contained page (figures inline), beside it."""
RELOAD = "RELOAD.md"
"""How to reload each artifact, as commands that work."""
EFFECTS_PNG = "effects.png"
PER_CLASS_PNG = "per_class_change.png"
TIMELINE_PNG = "timeline.png"
CURVES_PNG = "curves.png"
PLOTS = (EFFECTS_PNG, CURVES_PNG, PER_CLASS_PNG, TIMELINE_PNG)
"""The report's plots, beside it."""
LEDGER = "ledger.db"
"""The Optuna study (optuna-dashboard reads it)."""
LEDGER_LOCK = f"{LEDGER}.lock"
"""The ledger's former advisory lock file: no longer written (the results step is the ledger's
one writer), still allowed in folders written before."""
LOCK = ".lock"
"""The one-writer lock of the folder (`folder_lock`)."""
PROBE_JSON = "probe.json"
PROBE_MD = "PROBE.md"
"""What `ablate probe --out DIR` writes (into a campaign's folder too)."""

RECORDS = "records"
"""One completion record per finished run: `records/<run_id>.json`."""
METRICS = "metrics"
"""Per-run step and evaluation metrics: `metrics/<run_id>.steps.csv`, `.evals.csv`."""
PREDICTIONS = "predictions"
"""Per-run predictions on the held-out set: `predictions/<run_id>.csv`."""
MODELS = "models"
"""Final weights of accepted runs: `models/<run_id>.pt`."""
LOGS = "logs"
"""What each run's code printed (`logs/<run_id>.log`, `logs/preflight.log`): frameworks' tips
and warnings, a command's own lines. Appended to as jobs run; not part of the verified record."""
PREFLIGHT_LOG = f"{LOGS}/preflight.log"
"""The preflight's output (the restart check trains the workload three times)."""
COMMITS = "commits"
"""Each run's committed checkpoints as the campaign holds them (`commits/<run_id>.json`: step ->
sha256 of its COMMIT.json), which a resume checks the store against (`checkpoint/held.py`)."""
RUN_FOLDERS = (METRICS, PREDICTIONS, RECORDS, MODELS)
"""The folders holding one file (or two) per run."""
WRITTEN_FOLDERS = ("", *RUN_FOLDERS, COMMITS)
"""Where the campaign writes files through temporaries (`.<name>.<random>.tmp`, `.part`)."""

TOP_LEVEL = frozenset(
    {
        *(MANIFEST, PLAN, RUNS_CSV, REPORT, REPORT_HTML, RELOAD, *PLOTS),
        *(REGISTRATION, PROJECTION, PREFLIGHT, GATE, LOOKS, REFRAME_DRAFT),
        *(LEDGER, LEDGER_LOCK, LOCK, PROBE_JSON, PROBE_MD, LOGS, COMMITS),
        *RUN_FOLDERS,
    }
)
"""Every name the top of an output folder may hold (besides a relative store's folder)."""


def record_name(run_id: str) -> str:
    """The run's completion record, relative to the folder (as the manifest names it)."""
    return f"{RECORDS}/{run_id}.json"


def run_log_name(run_id: str) -> str:
    """The run's log, relative to the folder: what its code printed."""
    return f"{LOGS}/{run_id}.log"


def run_file_names(run_id: str) -> dict[str, str]:
    """Every file a run may export, by kind, relative to the folder (predictions and the model
    only when the run wrote them)."""
    return {
        "steps": f"{METRICS}/{run_id}.steps.csv",
        "evals": f"{METRICS}/{run_id}.evals.csv",
        "predictions": f"{PREDICTIONS}/{run_id}.csv",
        "model": f"{MODELS}/{run_id}.pt",
    }


# -- what `ablate verify` checks against, recorded in manifest.json by the results step ---------

DEFAULT_TOLERANCE = 1e-6
"""Absolute difference allowed between a re-evaluated and the recorded metric, for a run that
trained on the CPU. The same weights evaluated by the same code on the CPU give the same
numbers up to float summation order; one changed prediction on digits' 364 held-out inputs
moves accuracy by 2.7e-3, so any real difference is far above this."""
CROSS_DEVICE_TOLERANCE = 1e-2
"""The same, for a run that trained on a GPU and is re-evaluated on the CPU: logits differ by
float noise there, which may flip a near-tied prediction or two (untested without a GPU)."""
REEVALUATION_DEVICE = "cpu"
"""Where `ablate verify` re-evaluates the saved weights."""
