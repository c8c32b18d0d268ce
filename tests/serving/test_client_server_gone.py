"""A server that drops the connection while dying is seen gone, even when its exit lags the
closed socket (what happens under load: the kernel closes the files before the exit shows)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from qualify.serving.client import Client, ServerGone


def dropping_listener() -> tuple[socket.socket, threading.Thread]:
    """A real socket that accepts one connection, reads the request and closes without answering."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def test_a_dropped_connection_waits_for_the_exit_that_follows_it() -> None:
    listener, thread = dropping_listener()
    dropped_at: list[float] = []

    def alive() -> bool:
        # The process is seen exited 0.3 s after the first look that follows the dropped request.
        if not thread.is_alive():
            dropped_at.append(dropped_at[0] if dropped_at else time.monotonic())
            return time.monotonic() - dropped_at[0] < 0.3
        return True

    client = Client(f"http://127.0.0.1:{listener.getsockname()[1]}", 5.0, alive)
    with pytest.raises(ServerGone, match="exited during a request"):
        client.post("/completion", {"prompt": "x"})
    client.close()
    listener.close()


def test_a_dropped_connection_from_a_live_server_is_one_case_failing() -> None:
    listener, _ = dropping_listener()
    client = Client(f"http://127.0.0.1:{listener.getsockname()[1]}", 5.0, lambda: True)
    reply = client.post("/completion", {"prompt": "x"})
    assert reply.status == 0 and "RemoteProtocolError" in reply.error
    client.close()
    listener.close()
