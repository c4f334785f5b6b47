"""A real S3-protocol server on loopback (moto's server mode), shared by a test session.

    def test_x(s3_endpoint): ...   # "http://127.0.0.1:PORT", bucket `ablate-test` exists

Dummy credentials are set in the environment for the whole session: s3fs reads them there,
exactly as it would read a user's.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

BUCKET = "ablate-test"
DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """Start moto on 127.0.0.1, create the test bucket, stop the server after the session."""
    from moto.server import ThreadedMotoServer

    with pytest.MonkeyPatch.context() as patch:
        for name, value in DUMMY_CREDENTIALS.items():
            patch.setenv(name, value)
        patch.delenv("AWS_PROFILE", raising=False)
        port = free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        endpoint = f"http://127.0.0.1:{port}"
        try:
            import boto3

            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
            yield endpoint
        finally:
            server.stop()
