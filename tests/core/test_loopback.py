"""A role's server on a free loopback port, started again when its port was taken before it
bound it (`qualify.core.loopback`, shared by serving, the bench's server blocks and the soak).

The server here is Python's own `http.server` serving a folder that holds a file `health`, so
that `GET /health` answers 200: the test is of the harness's start and retry, which need a real
process that binds a real port, not of an engine. The taken port is taken for real: a socket of
this test listens on it, as another process's socket would.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from qualify.core import loopback, process
from qualify.core.checkspec import CheckSpec
from qualify.core.config import ArmSpec, ProjectConfig
from qualify.core.context import CheckContext, RoleArm
from qualify.core.errors import PlaceholderError
from qualify.core.process import ServerExited

SERVER = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1 --directory {{project}}/www"


def context(tmp_path: Path, echoed: list[str]) -> CheckContext:
    (tmp_path / "www").mkdir(exist_ok=True)
    (tmp_path / "www" / "health").write_text("ok\n")
    config = ProjectConfig(
        path=tmp_path / "qualify.toml",
        root=tmp_path,
        flake=".",
        plan_dir=None,
        pinned="pinned",
        reference=None,
        runs_dir=tmp_path / "runs",
        arms={},
        vars={},
        inherit_env=(),
    )
    arm = RoleArm("pinned", ArmSpec("pinned", ".#default"), out=str(tmp_path))
    return CheckContext(
        spec=CheckSpec("c", "command", {}, {}, ("pinned",)),
        folder=tmp_path / "c",
        run_dir=tmp_path,
        config=config,
        arms={"pinned": arm},
        echo=echoed.append,
    )


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port some other socket listens on (and never answers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_server_whose_port_was_taken_starts_again_on_another(
    tmp_path: Path, held_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first port handed out is already held, as when another socket took it between the
    # choice and the bind; later ones are really free.
    ports = iter([held_port])
    monkeypatch.setattr(loopback, "free_port", lambda: next(ports, None) or socket_free_port())
    echoed: list[str] = []
    ctx = context(tmp_path, echoed)
    with loopback.loopback_server(ctx, "pinned", SERVER, ready_timeout_s=30) as started:
        pid = started.process.process.pid
        assert started.process.alive()
        assert not started.base_url.endswith(f":{held_port}")
        assert loopback.health_ok(started.base_url)
    assert any(f"port {held_port} was taken" in line for line in echoed), echoed
    assert not process.group_alive(pid)


def test_a_server_that_fails_on_a_free_port_is_not_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen: list[int] = []

    def choose() -> int:
        chosen.append(socket_free_port())
        return chosen[-1]

    monkeypatch.setattr(loopback, "free_port", choose)
    echoed: list[str] = []
    ctx = context(tmp_path, echoed)
    broken = f"{sys.executable} -c 'raise SystemExit(2)' {{port}}"
    with pytest.raises(ServerExited), loopback.loopback_server(ctx, "pinned", broken, ready_timeout_s=30):
        pytest.fail("a server that exits is never yielded")
    assert len(chosen) == 1, "a failure that is not a taken port is the server's own: no retry"
    assert not any("trying another" in line for line in echoed)


def test_a_template_that_does_not_fill_is_refused_before_anything_starts(tmp_path: Path) -> None:
    ctx = context(tmp_path, [])
    with (
        pytest.raises(PlaceholderError, match="nope"),
        loopback.loopback_server(ctx, "pinned", f"{SERVER} {{nope}}", ready_timeout_s=30),
    ):
        pytest.fail("nothing starts")
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").rglob("*.log"))


def socket_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
