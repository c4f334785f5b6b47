"""A job's output reaches its log only through the one redaction: what the code prints on
stdout and stderr, what its logging emits and what the processes it starts write."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablations.security.credentials import MASK
from ablations.workers.output import LINE_LIMIT, output_to

ENV_SECRET = "env-planted-secret-value"
HF = "hf_" + "plantedHuggingFaceToken0123456789"
PASSWORD = "planted-url-pa55word"
TOKEN = "planted0query0token"
BEARER = "eyJplanted.bearer.token"
KEY_ID = "AKIAPLANTEDKEY000000"
PLANTED = (ENV_SECRET, HF, PASSWORD, TOKEN, BEARER, KEY_ID)
LINES = (
    f"loaded with {ENV_SECRET}",
    f"login {HF}",
    f"fetching https://user:{PASSWORD}@data.example.com/set.tar",
    f"GET /x?token={TOKEN} 200",
    f"Authorization: Bearer {BEARER}",
    f"key id {KEY_ID}",
)
WORDS = "NoCredentialsError: Unable to locate credentials; unknown key; epoch 3 loss=0.25"


JOB = f"""
import logging, os, subprocess, sys
from pathlib import Path

import pytest
from ablations.workers.output import output_to

logging.basicConfig()  # the root logger on stderr, as a framework's would be
with output_to(Path(sys.argv[1]), "logs/r.log"):
    print({LINES[0]!r}, {LINES[1]!r}, sep="\\n", flush=True)
    logging.getLogger("lib").warning({LINES[2]!r})
    os.write(2, {LINES[3]!r}.encode() + b"\\n")  # C code writing to the descriptor
    script = "import sys; print(%r); print(%r, file=sys.stderr)" % ({LINES[4]!r}, {LINES[5]!r})
    subprocess.run([sys.executable, "-c", script], check=True)
    print({WORDS!r}, end="", flush=True)  # a last line without its newline
"""


def test_every_way_a_job_prints_is_redacted_before_the_log(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "r.log"
    env = {**os.environ, "WANDB_API_KEY": ENV_SECRET}
    shown = subprocess.run(
        [sys.executable, "-c", JOB, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert not shown.stdout and not shown.stderr  # the terminal saw none of it
    text = log.read_text()
    assert not [s for s in PLANTED if s in text], text
    assert text.count(MASK) == len(PLANTED) - 1  # the URL loses its user:password@ whole
    assert "https://data.example.com/set.tar" in text and "Authorization: Bearer" in text
    assert "WARNING:lib:fetching" in text and text.endswith(WORDS)  # words stay words


def test_a_line_without_end_is_written_in_pieces_while_the_job_runs(tmp_path: Path) -> None:
    log = tmp_path / "r.log"
    with output_to(tmp_path, "r.log"):
        os.write(1, b"x" * (LINE_LIMIT + 10))
        os.write(1, b"\rstep 5/10")  # a progress bar redraws its line with \r
        os.write(1, f" {KEY_ID}".encode())
    assert log.read_bytes().decode() == "x" * (LINE_LIMIT + 10) + f"\rstep 5/10 {MASK}"


@pytest.mark.parametrize("planted", ["logs", "logs/r.log"])
def test_a_link_planted_in_the_folder_is_not_written_through(tmp_path: Path, planted: str) -> None:
    outside = tmp_path / "outside"
    (tmp_path / "out" / planted).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "out" / planted).symlink_to(outside)  # dangling: the write would create it
    with output_to(tmp_path / "out", "logs/r.log"):
        os.write(1, b"not here\n")
    assert not outside.exists()
