"""One inference server per role: started from the plan's template on a free loopback port,
waited on through `/health`, described by `/props`, always torn down.

The process itself goes through `CheckContext.serve` (the one runner: own process group, log
file, group killed on exit, on Ctrl-C and on a failing suite). A server that exits before it is
ready because its port was taken meanwhile is started again on another port.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from qualify.core.context import CheckContext, free_port
from qualify.core.errors import QualifyError, ToolMissing
from qualify.core.process import Server, ServerExited
from qualify.serving.client import Client, ServerGone

#: Attempts when the chosen port turns out to be taken by the time the server binds it.
PORT_ATTEMPTS = 3


class ServerStartFailed(QualifyError):
    """The server did not become ready. `missing` marks a harness problem (no such binary)."""

    def __init__(self, message: str, tail: list[str], *, missing: bool = False) -> None:
        super().__init__(message, "\n".join(tail[-15:]) or None)
        self.tail = tail
        self.missing = missing


@dataclass
class RoleServer:
    """A ready server playing `role`, with its client and what `/props` said."""

    role: str
    base_url: str
    process: Server
    client: Client
    log: Path
    props: dict[str, Any] = field(default_factory=dict)
    started_s: float = 0.0

    def alive(self) -> bool:
        return self.process.alive()

    def tail(self, lines: int = 20) -> list[str]:
        return list(self.process.tail()[-lines:])

    def describe(self) -> dict[str, Any]:
        """What is saved about the server: build, slots, context, how long it took to start."""
        settings = self.props.get("default_generation_settings") or {}
        return {
            "base_url": self.base_url,
            "argv": self.process.recorded_argv(),
            "log": str(self.log),
            "ready_after_s": round(self.started_s, 3),
            "build_info": self.props.get("build_info"),
            "total_slots": self.props.get("total_slots"),
            "n_ctx": settings.get("n_ctx"),
            "model_path": self.props.get("model_path"),
            "chat_template_caps": self.props.get("chat_template_caps"),
        }


def health_ok(base_url: str) -> bool:
    """`GET /health` answers 200 (503 while the model loads, refused before the bind)."""
    try:
        return httpx.get(f"{base_url}/health", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Connections of the server just stopped linger in TIME_WAIT: only a listener counts.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


@contextmanager
def role_server(
    ctx: CheckContext, role: str, template: str, *, ready_timeout_s: float, request_timeout_s: float
) -> Iterator[RoleServer]:
    """Start `template` for `role` (with `{port}` filled), yield it ready, always stop it."""
    for attempt in range(PORT_ATTEMPTS):
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        argv = ctx.argv(template, role, port=str(port))
        started = time.monotonic()

        def ready(url: str = base_url) -> bool:
            return health_ok(url)

        manager = ctx.serve(role, argv, ready, ready_timeout_s)
        try:
            server = manager.__enter__()
        except ToolMissing as exc:
            raise ServerStartFailed(exc.message, [], missing=True) from None
        except QualifyError as exc:
            tail = (exc.hint or "").splitlines()
            exited = isinstance(exc, ServerExited)
            if exited and attempt + 1 < PORT_ATTEMPTS and _port_taken(port):
                ctx.echo(f"{role}: port {port} was taken before the server bound it; trying another")
                continue
            raise ServerStartFailed(exc.message, tail) from None
        try:
            # A server that lost its port to another process exits right after the bind fails;
            # the health check may have reached the other process: look once more.
            time.sleep(0.1)
            if not server.alive():
                if attempt + 1 < PORT_ATTEMPTS:
                    manager.__exit__(None, None, None)
                    continue
                raise ServerStartFailed(
                    f"the server exited right after {base_url} answered /health", list(server.tail())
                )
            client = Client(base_url, request_timeout_s, server.alive)
            running = RoleServer(role, base_url, server, client, ctx.log(role, "server"))
            running.started_s = time.monotonic() - started
            try:
                props = client.get("/props")
            except ServerGone:
                raise ServerStartFailed("the server exited while /props was read", running.tail()) from None
            running.props = props.json if props.status == 200 else {}
            try:
                yield running
            finally:
                client.close()
        except BaseException as exc:
            if not manager.__exit__(type(exc), exc, exc.__traceback__):
                raise
        else:
            manager.__exit__(None, None, None)
        return
