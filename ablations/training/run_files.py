"""A finished run's files in the output folder: its metrics, predictions and final weights.

    files = write_run_files(out_dir, "r1", history, predictions, model=None)
    files["steps"]     # "metrics/r1.steps.csv", relative to the folder

The training driver trains; this module writes what the run leaves behind, every file whole
through the folder's one atomic writer (`ablations.files.atomic`), named by `ablations.files.names`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ablations.files.atomic import atomic_write_bytes, atomic_write_text
from ablations.files.names import run_file_names
from ablations.run.hooks import RunHistory
from ablations.run.workload import Predictions

if TYPE_CHECKING:  # a command's run writes its CSV files here without loading torch
    import torch


def write_run_files(
    out_dir: Path,
    run_id: str,
    history: RunHistory,
    predictions: Predictions | None,
    model: torch.nn.Module | None = None,
) -> dict[str, str]:
    """Write the run's step losses, evaluations and final predictions; kind -> relative path.

    With `model`, also the final weights as `models/<run_id>.pt`: the model's `state_dict`
    on the CPU and nothing else, so `torch.load(weights_only=True)` reads it and the folder
    re-evaluates on its own after the checkpoint store is pruned or gone."""
    if Path(run_id).name != run_id or run_id.startswith("."):
        raise ValueError(f"run id {run_id!r} is not a plain file name")
    every = run_file_names(run_id)
    files = {"steps": every["steps"], "evals": every["evals"]}
    write_csv(out_dir / files["steps"], ["step", "loss"], enumerate(history.losses, start=1))
    names = list(dict.fromkeys(k for e in history.evaluations for k in e if k != "step"))
    rows = ([int(e["step"]), *(e.get(n, "") for n in names)] for e in history.evaluations)
    write_csv(out_dir / files["evals"], ["step", *names], rows)
    if predictions is not None:
        files["predictions"] = every["predictions"]
        columns = zip(predictions.ids, predictions.labels, predictions.predicted, strict=True)
        write_csv(out_dir / files["predictions"], ["input_id", "label", "predicted"], columns)
    if model is not None:
        import torch  # loaded already: the run trained `model`

        files["model"] = every["model"]
        weights = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        buffer = io.BytesIO()
        torch.save(weights, buffer)
        atomic_write_bytes(out_dir / files["model"], buffer.getvalue())
    return files


def write_csv(path: Path, header: list[str], rows: Iterable[Iterable[object]]) -> None:
    """Write the whole CSV through the folder's atomic writer: readers never see half a file."""
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(header)
    writer.writerows(rows)  # floats as repr: they read back bit for bit
    atomic_write_text(path, text.getvalue())
