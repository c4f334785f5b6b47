"""A loopback TCP proxy in front of a real server (moto's S3), with faults switched at will.

    proxy = FaultProxy(upstream_port).start()   # "http://127.0.0.1:PORT" is proxy.endpoint
    proxy.down()    # every connection, open or new, is cut at once: the store is unreachable
    proxy.up()      # traffic flows again
    proxy.stall()   # requests reach the server, its answers are held back: reads hang
    proxy.stop()

A client sees what it sees when a network or an endpoint fails: connections reset, or a
response that never comes. Nothing in the code under test knows the proxy is there.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from typing import Literal

Mode = Literal["up", "down", "stall"]
RESET = struct.pack("ii", 1, 0)
"""SO_LINGER on, 0 s: closing the socket resets the connection, as a dead endpoint does."""


class FaultProxy:
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`upstream`, unless told to fail."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.mode: Mode = "up"
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def start(self) -> FaultProxy:
        threading.Thread(target=self._accept, name="fault-proxy", daemon=True).start()
        return self

    def up(self) -> None:
        self.mode = "up"

    def down(self) -> None:
        self.mode = "down"
        self._cut_all()

    def stall(self) -> None:
        self.mode = "stall"
        self._cut_all()  # pooled connections too: the next request meets the stall

    def stop(self) -> None:
        self._stopped.set()
        self._listener.close()
        self._cut_all()

    def _cut_all(self) -> None:
        with self._lock:
            sockets, self._open = list(self._open), set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
                sock.close()  # with a zero linger: a reset, as a dead endpoint's

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.mode == "down":
                with contextlib.suppress(OSError):
                    client.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                    )
                    client.close()
                continue
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(("127.0.0.1", self.upstream))
        except OSError:
            client.close()
            return
        with self._lock:
            self._open |= {client, server}
        watched = [client, server]
        try:
            while not self._stopped.is_set():
                ready, _, _ = select.select(watched, [], [], 0.5)
                for sock in ready:
                    data = sock.recv(65536)
                    if sock is server and self.mode == "stall":
                        if not data:  # the server is done; the client still waits
                            watched = [client]
                        continue  # the answer is held back: the client waits for it
                    if not data:
                        return
                    (server if sock is client else client).sendall(data)
        except (OSError, ValueError):  # cut under it (`down`, `stall`, `stop`)
            return
        finally:
            with self._lock:
                self._open -= {client, server}
            for sock in (client, server):
                with contextlib.suppress(OSError):
                    sock.close()
