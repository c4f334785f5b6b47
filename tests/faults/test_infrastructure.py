"""The store and the disk failing under a campaign: never a verdict. An S3 store unreachable in
preflight and then in the main phase (moto behind a loopback fault proxy), and a file store
on a real, full file system (a tiny tmpfs): each time `ablate run` exits 1 with one line
naming what failed, no decision is written, and the rerun retrains what failed and reaches
the same decision, with the same metrics, as an undisturbed campaign; the folder verifies.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ablations.checkpoint.outage import OUTAGE_ENV
from ablations.verify.folder import verify_folder
from tests.fault_proxy import FaultProxy
from tests.faults.conftest import Campaign, fault_plan
from tests.s3_server import BUCKET

pytestmark = [pytest.mark.slow, pytest.mark.long]  # `make test-long`: minutes each

UNDECIDED = "no decision was taken: rerun the same command to continue"

RIDE = {OUTAGE_ENV: "1"}
"""A run rides through one second of outage here (minutes in use): the faults below last."""


def _plan(store: str, endpoint: str | None = None) -> dict[str, Any]:
    checkpoint = {"store": store, "endpoint_url": endpoint, "interval": {"steps": 50}}
    return fault_plan(
        checkpoint={k: v for k, v in checkpoint.items() if v is not None},
        resources={"devices": 1},  # one slot: the runs follow each other
    )


def _outcome(out: Path) -> tuple[str, dict[tuple[str, str, int], tuple[str, object]]]:
    """The decision, and each run's status and metrics by phase, variant and seed (run ids
    differ between plans naming other stores)."""
    manifest = json.loads((out / "manifest.json").read_text())
    runs = {
        (r["phase"], r["variant"], r["seed"]): (r["status"], r["metrics"]) for r in manifest["runs"]
    }
    return manifest["decision_reached"], runs


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[Any, Any]]:
    root = tmp_path_factory.mktemp("undisturbed")
    reference = Campaign(root / "c", _plan("file://./ckpt"), root / "prefect-home")
    result = reference.run()
    assert result.returncode == 0, result.stdout + result.stderr
    return _outcome(reference.out)


@pytest.fixture
def proxy(s3_endpoint: str) -> Iterator[FaultProxy]:
    proxy = FaultProxy(int(s3_endpoint.rsplit(":", 1)[1])).start()
    yield proxy
    proxy.stop()


def _undecided(result: subprocess.CompletedProcess[str], out: Path, what: str) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert what in last and last.endswith(UNDECIDED), last
    assert "Fix the workload" not in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert not (out / "manifest.json").exists() and not (out / "REPORT.md").exists()
    return last


def test_a_store_outage_in_preflight_then_mid_run_leaves_the_campaign_undecided(
    tmp_path: Path, proxy: FaultProxy, undisturbed: tuple[str, dict[Any, Any]]
) -> None:
    campaign = Campaign(
        tmp_path / "c", _plan(f"s3://{BUCKET}/outage", proxy.endpoint), tmp_path / "prefect-home"
    )
    # 1. Unreachable from the start: preflight reports the store, not a workload to fix.
    proxy.down()
    _undecided(
        campaign.run(**RIDE), campaign.out, "the checkpoint store was unreachable in preflight"
    )
    assert not (campaign.out / "gate.json").exists()

    # 2. Back, then gone again while a main run trains: its save fails after the outage it
    # rides through, and the next runs cannot open the store.
    proxy.up()
    paused, go = tmp_path / "paused", tmp_path / "go"
    process = campaign.start(**RIDE, ABLATE_FAULT_PAUSE=f"120:{paused}:{go}")
    deadline = time.monotonic() + 240
    while not paused.exists():
        assert process.poll() is None and time.monotonic() < deadline, campaign.logs[-1]
        time.sleep(0.05)
    proxy.down()
    go.touch()
    assert process.wait(timeout=240) == 1
    output = Path(campaign.logs[-1]).read_text()
    assert "the checkpoint store was unreachable under" in output, output
    assert output.rstrip().endswith(UNDECIDED), output
    assert not (campaign.out / "manifest.json").exists()
    lost = [
        json.loads(p.read_text()) for p in campaign.records.glob("*.json")
        if json.loads(p.read_text())["status"] == "failed"
    ]  # fmt: skip
    assert lost and all(r["error"]["cause"] == "infrastructure" for r in lost), lost
    looks = campaign.out / "looks.json"
    assert not looks.exists() or json.loads(looks.read_text()).get("looks") == []

    # 3. Back for good: the rerun retrains the failed runs and decides as if nothing happened.
    proxy.up()
    result = campaign.run(**RIDE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _outcome(campaign.out) == undisturbed
    assert [str(p) for p in verify_folder(campaign.out).problems] == []


@contextlib.contextmanager
def _tiny_filesystem(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` at `path` (root's; skipped where this process may not mount)."""
    path.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(folder: Path) -> Path:
    """Write a ballast file until the file system says it is full (ENOSPC)."""
    ballast = folder / "ballast"
    with ballast.open("wb") as file, contextlib.suppress(OSError):
        while True:
            file.write(b"\0" * 65536)
            file.flush()
            os.fsync(file.fileno())
    try:
        (folder / "probe").write_bytes(b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    else:
        pytest.fail("the tmpfs was not full")
    return ballast


def test_a_full_disk_under_the_store_leaves_the_campaign_undecided(
    tmp_path: Path, undisturbed: tuple[str, dict[Any, Any]]
) -> None:
    with _tiny_filesystem(tmp_path / "disk", "8m") as disk:
        campaign = Campaign(tmp_path / "c", _plan(f"file://{disk}/ckpt"), tmp_path / "prefect-home")
        paused, go = tmp_path / "paused", tmp_path / "go"
        process = campaign.start(**RIDE, ABLATE_FAULT_PAUSE=f"120:{paused}:{go}")
        deadline = time.monotonic() + 240
        while not paused.exists():
            assert process.poll() is None and time.monotonic() < deadline, campaign.logs[-1]
            time.sleep(0.05)
        ballast = _fill(disk)
        go.touch()
        assert process.wait(timeout=240) == 1
        output = Path(campaign.logs[-1]).read_text()
        assert "the disk was full under" in output, output
        assert output.rstrip().endswith(UNDECIDED), output
        assert not (campaign.out / "manifest.json").exists()

        ballast.unlink()  # space freed: the rerun retrains what failed
        result = campaign.run(**RIDE)
        assert result.returncode == 0, result.stdout + result.stderr
        assert _outcome(campaign.out) == undisturbed
        assert [str(p) for p in verify_folder(campaign.out).problems] == []
