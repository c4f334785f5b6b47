"""bench/gpu_check.sh's offline install on CPU, as the lent card runs it with a wheelhouse.

A wheelhouse is built here without a registry (one small project's wheel); the check makes a
fresh venv that sees this environment's packages through a .pth file (the card's image, here),
installs the wheelhouse with pip --no-index and the project editable from the checkout, runs
one part (the checkpoint stall) and returns its three files. Pip is pointed at a registry that
does not exist: any download attempt would fail the install."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import ROOT


def tiny_wheel(folder: Path, wheelhouse: Path) -> None:
    """A real wheel, built here by pip without an index: a module saying where it came from."""
    (folder / "src" / "offline_probe").mkdir(parents=True)
    (folder / "src" / "offline_probe" / "__init__.py").write_text('MARK = "wheelhouse"\n')
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "offline-probe"\nversion = "1.0"\n'
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(wheelhouse), str(folder)],
        check=True, capture_output=True,
    )  # fmt: skip


# A venv, an editable install and one part (40 s on 2 cores), for the lent card's script
# only: `make test-long`, which CI runs after `make test`.
@pytest.mark.slow
@pytest.mark.long
def test_the_offline_install_path_runs_a_part_and_returns_three_files(tmp_path: Path) -> None:
    wheelhouse, venv, out = tmp_path / "wheelhouse", tmp_path / "venv", tmp_path / "out"
    tiny_wheel(tmp_path / "tiny", wheelhouse)
    env = {
        **os.environ, "WHEELHOUSE": str(wheelhouse), "PYTHON": sys.executable,
        "VENV": str(venv), "PARTS": "stall", "WORK": str(tmp_path / "work"),
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_EXTRA_INDEX_URL": "",
        "PIP_FIND_LINKS": "", "PREFECT_HOME": str(tmp_path / "prefect"),
    }  # fmt: skip
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh"), "--cpu", str(out)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    summary = (out / "summary.txt").read_text()
    assert done.returncode == 0, summary + done.stdout[-3000:]
    assert sorted(p.name for p in out.iterdir()) == [
        "gpu_check.log",
        "results.tar.gz",
        "summary.txt",
    ]
    assert f"install: 1 wheels from {wheelhouse} (no index), the project editable" in summary
    assert "all requirements met" in summary
    assert "ok     stall" in summary and "stall" in summary and "store: " in summary
    assert summary.rstrip().endswith("every part ok")
    assert "install: torch of" in (out / "gpu_check.log").read_text()
    python = venv / "bin" / "python"
    code = "import offline_probe, ablations; print(offline_probe.MARK, ablations.__file__)"
    seen = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert seen[0] == "wheelhouse"  # installed from the folder
    assert Path(seen[1]).is_relative_to(ROOT)  # the checkout itself, editable
    with tarfile.open(out / "results.tar.gz") as tar:
        names = tar.getnames()
    assert "./checkpoint_stall.txt" in names
    assert not [n for n in names if "checkpoints/" in n or n.endswith(".pt")]
