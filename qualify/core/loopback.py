"""A role's server on a free loopback port: started from the plan's template with `{port}`
filled, ready once its health endpoint answers 200, started again on another port when the
port was taken between its choice and the server's bind.

Why the retry: `free_port` can only say a port is free now. Until the server binds it (seconds,
while a model loads), any other socket on the machine may take it, among them the outgoing
connections of health checks and requests to servers already running, which draw their local
ports from the same range. The stages that start many servers (a bench block starts every
role's server, a concurrent soak all of them at once) would otherwise call such a loss the
role's failure. A server that did not start for another reason is not retried.

The process itself goes through `CheckContext.serve` (own process group, log file, the group
killed on exit).
"""

from __future__ import annotations

import functools
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import httpx

from qualify.core.context import CheckContext, free_port
from qualify.core.process import Server, ServerExited

#: Attempts when the chosen port turns out to be taken by the time the server binds it.
PORT_ATTEMPTS = 3


@dataclass(frozen=True)
class Started:
    """A ready server: its process, its URL, and how long it took to become ready."""

    process: Server
    base_url: str
    ready_after_s: float


def health_ok(base_url: str, path: str = "/health") -> bool:
    """`GET path` answers 200 (llama-server's `/health` answers 503 while the model loads, and
    the connection is refused before the bind)."""
    try:
        return httpx.get(base_url + path, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def port_taken(port: int) -> bool:
    """Some socket listens on, or holds, 127.0.0.1:`port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Connections of a server just stopped linger in TIME_WAIT: only a live socket counts.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


@contextmanager
def loopback_server(
    ctx: CheckContext, role: str, template: str, *, ready_timeout_s: float, health: str = "/health"
) -> Iterator[Started]:
    """Start `template` for `role` on a free loopback port, yield it ready, always stop it.

    Raises what `CheckContext.serve` raises (`ToolMissing` for no such program, `ServerExited`,
    a `QualifyError` for a server not ready in time) once a start fails for another reason than
    a taken port, or on the last attempt; a `PlaceholderError` for a template that does not
    fill, before anything starts."""
    ctx.argv(template, role, port="0")
    for attempt in range(PORT_ATTEMPTS):
        last = attempt + 1 == PORT_ATTEMPTS
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        argv = ctx.argv(template, role, port=str(port))
        started = time.monotonic()
        ready = functools.partial(health_ok, base_url, health)
        with ExitStack() as stack:
            try:
                server = stack.enter_context(ctx.serve(role, argv, ready, ready_timeout_s))
            except ServerExited:
                if last or not port_taken(port):
                    raise
                ctx.echo(f"{role}: port {port} was taken before the server bound it; trying another")
                continue
            ready_after = time.monotonic() - started
            # A server that lost its port exits right after its bind fails, and the health check
            # may have reached whatever holds the port: look once more.
            time.sleep(0.1)
            if not server.alive():
                if last:
                    raise ServerExited(
                        f"{role}: the server exited right after {base_url} answered {health}",
                        "\n".join(server.tail()) or None,
                    )
                ctx.echo(f"{role}: the server on port {port} exited as it became ready; trying another")
                continue
            yield Started(server, base_url, ready_after)
            return
