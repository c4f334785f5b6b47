"""RELOAD.md: how to reload each kind of artifact of the folder, as commands that work.

Every fenced `sh` block is a complete command, run from inside the output folder with the
Python environment the campaign ran in (`tests/flows/test_output_folder.py` runs them all on
a copy of a real folder). The commands name a real run of this campaign, so they work as
written; any other run id from runs.csv works the same way.
"""

from __future__ import annotations

import json
import shlex

from ablations.byo import KEPT_MODEL, adapter_field
from ablations.campaign.manifest import Manifest, ManifestRun
from ablations.files.names import DEFAULT_TOLERANCE
from ablations.plan.model import Plan


def _example(runs: list[ManifestRun]) -> ManifestRun | None:
    """The run the commands use: an accepted main-phase run, else any accepted one."""
    accepted = [r for r in runs if r.status == "accepted"]
    main = [r for r in accepted if r.planned.phase == "main"]
    return (main or accepted)[0] if accepted else None


def _block(text: str) -> str:
    return f"```sh\n{text.strip()}\n```\n"


def _python(code: str) -> str:
    """`python -c CODE`, the code quoted for the shell as one word: a path or URL pasted into
    it (each as a Python literal, `repr`) can neither end the quote nor expand (`$`, `` ` ``)."""
    return f"python -c {shlex.quote(code)}"


def _tables(manifest: Manifest) -> str:
    study = repr(str(manifest.ledger_study))
    storage = repr(str(manifest.ledger_url))
    return (
        "## runs.csv and manifest.json\n\n"
        "One row per registered run (`metric` is the plan's metric, `model` the final "
        "weights, `checkpoint_uri` the last committed training state):\n\n"
        + _block(
            _python(
                "import pandas as pd; runs = pd.read_csv('runs.csv'); "
                "columns = ['run_id', 'variant', 'seed', 'status', 'metric']; "
                "print(runs[columns].to_string(index=False))"
            )
        )
        + "\nThe manifest holds the same runs with every field, the gate decision, the budget, "
        "the code version and environment, and each file's sha256 and size:\n\n"
        + _block(
            _python(
                "import json; m = json.load(open('manifest.json')); "
                "print(m['campaign_id'], m['plan_hash'][:12], (m['gate'] or {}).get('decision'), "
                "len(m['runs']), 'runs')"
            )
        )
        + "\n## The ledger (Optuna)\n\n"
        f"One trial per run that ran, in the study {study} of `{manifest.ledger_url}` "
        "(relative to this folder). Opening it may let SQLite rewrite the file, which is why "
        "the manifest holds no hash for it; `ablate verify` checks its trials instead.\n\n"
        + _block(
            _python(
                f"import optuna; study = optuna.load_study(study_name={study}, "
                f"storage={storage}); "
                "frame = study.trials_dataframe(attrs=('number', 'state', 'value', 'user_attrs')); "
                "columns = ['number', 'state', 'value', 'user_attrs_run_id']; "
                "print(frame[columns].to_string(index=False))"
            )
        )
        + f"\nor browse it: `optuna-dashboard {shlex.quote(str(manifest.ledger_url))}` from "
        "inside this folder.\n"
    )


def _run_files(run: ManifestRun) -> str:
    reads = [
        f"print(pd.read_csv({path!r}).tail(3))"
        for kind in ("steps", "evals", "predictions")
        if (path := run.run_file(kind)) is not None
    ]
    if not reads:
        return ""
    return (
        "\n## Per-run metrics and predictions\n\n"
        "`metrics/<run_id>.steps.csv` (step, loss), `metrics/<run_id>.evals.csv` (step and each "
        "held-out metric), `predictions/<run_id>.csv` (input_id, label, predicted):\n\n"
        + _block(_python(f"import pandas as pd; {'; '.join(reads)}"))
    )


def _model(run: ManifestRun, plan: Plan) -> str:
    model = run.run_file("model")
    if model is None:
        return ""
    metric = plan.metric.name
    script = f"""
python - <<'EOF'
import json
import shlex

import torch

from ablations.training.driver import seed_everything
from ablations.run.workload import load_workload

RUN_ID = {json.dumps(run.planned.run_id)}
METRIC = {json.dumps(metric)}
run = next(r for r in json.load(open("manifest.json"))["runs"] if r["run_id"] == RUN_ID)
seed_everything(run["seed"])
workload = load_workload({json.dumps(plan.workload.entry)}).build(
    run["params"], seed=run["seed"], device=torch.device("cpu"), steps=run["steps"]
)
weights = torch.load({json.dumps(model)}, map_location="cpu", weights_only=True)
workload.model.load_state_dict(weights)
got = workload.evaluate().metrics[METRIC]
recorded = run["metrics"][METRIC]
print(f"{{RUN_ID}}: {{METRIC}} {{got}} re-evaluated, {{recorded}} recorded")
assert abs(got - recorded) <= {DEFAULT_TOLERANCE!r}, "differs beyond the tolerance"
EOF
"""
    return (
        "\n## A run's final model: reload and re-evaluate\n\n"
        "`models/<run_id>.pt` is the final `state_dict` of each accepted run (tensors only, "
        "so `torch.load(..., weights_only=True)` reads it). Rebuild the workload from the "
        "registered plan with the run's parameters and seed, load the weights and evaluate "
        f"on the CPU; the result equals the recorded metric within {DEFAULT_TOLERANCE:g} "
        "(absolute), the tolerance `ablate verify` uses:\n\n" + _block(script)
    )


def _checkpoint(run: ManifestRun, plan: Plan) -> str:
    record = run.record()
    uri = record.checkpoint.uri if record is not None else None
    if uri is None:
        return ""
    scheme = uri.partition("://")[0]
    head = (
        "\n## A run's checkpoint (full training state, in the store)\n\n"
        "The last committed checkpoint of each run is `checkpoint.uri` in the manifest "
        "(a step folder with `model.pt`, `state.pt` and `COMMIT.json`). It is the state a "
        "resume starts from, not necessarily the final step; `keep_last` prunes older ones.\n\n"
    )
    if scheme == "memory":
        return head + (
            "This campaign's store is `memory://`: it lives only inside the campaign's "
            "process and cannot be reloaded from another one; `models/` keeps the final "
            "weights.\n"
        )
    options = ""
    if scheme == "s3":
        endpoint = plan.checkpoint.endpoint_url
        options = f", endpoint_url={json.dumps(endpoint)}" if endpoint else ""
        head += "Credentials come from the environment (AWS_* variables or a profile).\n\n"
    head += (  # for every store scheme
        "Both files hold tensors and plain values only (numpy's RNG state as a tensor), so "
        "`torch.load(..., weights_only=True)` reads them without ablate; a workload whose own "
        "state holds numpy arrays needs `ablations.checkpoint.state.loads` instead.\n\n"
    )
    script = f"""
python - <<'EOF'
import io

import fsspec
import torch

URI = {json.dumps(uri)}
with fsspec.open(f"{{URI}}/model.pt", "rb"{options}) as handle:
    model = torch.load(io.BytesIO(handle.read()), map_location="cpu", weights_only=True)
with fsspec.open(f"{{URI}}/state.pt", "rb"{options}) as handle:
    state = torch.load(io.BytesIO(handle.read()), map_location="cpu", weights_only=True)
print(len(model), "tensors; step", state["step"], "of the run's training state")
EOF
"""
    return head + _block(script)


def _models_checked(plan: Plan) -> str:
    """Whether `ablate verify` re-evaluates the runs' models, and why not (an adapter)."""
    adapter = adapter_field(plan.workload)
    if adapter is None:
        return "every accepted run's final model re-evaluated"
    return f"no model re-evaluated ({KEPT_MODEL[adapter]})"


def reload_markdown(manifest: Manifest, plan: Plan) -> str:
    """The text of RELOAD.md for the folder the manifest describes."""
    run = _example(manifest.runs)
    parts = [
        f"# Reloading campaign {manifest.campaign_id}\n\n"
        "Run every command from inside this folder, in the Python environment the campaign "
        "ran in (`ablate` installed). `ablate verify .` checks all of it at once: every file "
        "against its sha256 in the manifest, each one parsed or loaded, "
        f"{_models_checked(plan)}, the checkpoints in the store; `ablate report .` rebuilds "
        "REPORT.md and its plots from the folder (byte for byte).\n\n",
        _tables(manifest),
    ]
    if run is None:
        parts.append("\nNo run was accepted: there is no final model to re-evaluate.\n")
    else:
        planned = run.planned
        parts.append(
            f"\nThe commands below use run `{planned.run_id}` ({planned.variant}, seed "
            f"{planned.seed}); any run id from runs.csv works the same way.\n"
        )
        parts += [_run_files(run), _model(run, plan), _checkpoint(run, plan)]
    return "".join(parts)
