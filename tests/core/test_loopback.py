"""A server started on a loopback port that another process took first: the start is tried again
on another port, and a failure that is not a lost port race is not retried. The servers are
Python's own http.server, a real process binding a real port; the squatter is a plain listening
socket held by the test."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from qualify.core import loopback, process
from qualify.core.environment import child_env
from qualify.core.groups import group_alive
from qualify.core.process import Server, ServerExited

PY = sys.executable


def squat(port: int, held: list[socket.socket]) -> None:
    """Another process's listener on `port`, held until the test ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    held.append(sock)


@pytest.fixture
def held() -> Iterator[list[socket.socket]]:
    sockets: list[socket.socket] = []
    yield sockets
    for sock in sockets:
        sock.close()


def test_a_port_taken_before_the_bind_is_retried_on_another(
    tmp_path: Path, held: list[socket.socket]
) -> None:
    tried: list[int] = []
    retried: list[str] = []

    def start(port: int) -> AbstractContextManager[Server]:
        tried.append(port)
        if len(tried) == 1:
            squat(port, held)  # taken between the pick and the server's bind
        argv = [PY, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)]
        return process.serve(
            argv,
            log=tmp_path / f"server-{len(tried)}.log",
            env=child_env(),
            ready=lambda: loopback.answers(f"http://127.0.0.1:{port}/"),
            ready_timeout_s=30,
        )

    with loopback.on_free_port(start, retried=retried.append) as (base_url, server):
        assert server.alive() and loopback.answers(base_url + "/")
        pid = server.process.pid
    assert len(tried) == 2 and base_url.endswith(f":{tried[1]}") and tried[0] != tried[1]
    assert retried and f"port {tried[0]} was taken" in retried[0]
    assert not group_alive(pid)  # stopped when the block left


def test_a_server_that_fails_on_a_free_port_is_not_retried(tmp_path: Path) -> None:
    tried: list[int] = []

    def start(port: int) -> AbstractContextManager[Server]:
        tried.append(port)
        return process.serve(
            [PY, "-c", "print('bad flag'); raise SystemExit(2)"],
            log=tmp_path / "bad.log",
            env=child_env(),
            ready=lambda: False,
            ready_timeout_s=30,
        )

    with pytest.raises(ServerExited, match="exited with 2"):
        with loopback.on_free_port(start):
            pass
    assert len(tried) == 1


def test_every_attempt_losing_its_port_fails_with_the_last_exit(
    tmp_path: Path, held: list[socket.socket]
) -> None:
    tried: list[int] = []

    def start(port: int) -> AbstractContextManager[Server]:
        tried.append(port)
        squat(port, held)
        argv = [PY, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
        return process.serve(
            argv, log=tmp_path / "taken.log", env=child_env(), ready=lambda: False, ready_timeout_s=30
        )

    with pytest.raises(ServerExited):
        with loopback.on_free_port(start, attempts=2):
            pass
    assert len(tried) == 2
