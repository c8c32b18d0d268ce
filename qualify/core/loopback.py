"""A server on a loopback port the OS picked, started again on another port when that port was
taken between the pick and the server's bind.

A free port is only free when it is picked: servers started side by side (a bench block's
roles, a concurrent soak) or any other process may take it before the server binds it. The
server then exits at once, or its health check reaches the other process. Either way it is the
harness's lost race, not the build's failure, so the start is tried again on a new port.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager

import httpx

from qualify.core.process import Server, ServerExited

#: Starts on a new port when the chosen one turned out to be taken by the time the server bound it.
PORT_ATTEMPTS = 3
#: How long after its first healthy answer a server must still be running to count as started:
#: one that lost its port exits right after the failed bind.
SETTLE_S = 0.1


def free_port() -> int:
    """A free loopback TCP port (the OS picks it; it is free when this returns)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_taken(port: int) -> bool:
    """True when a listener holds `port` on the loopback address."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Connections of a server just stopped linger in TIME_WAIT: only a listener counts.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def answers(url: str) -> bool:
    """`GET url` answers 200 (llama-server: 503 while the model loads, refused before the bind)."""
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def on_free_port(
    start: Callable[[int], AbstractContextManager[Server]],
    *,
    retried: Callable[[str], None] = lambda message: None,
    attempts: int = PORT_ATTEMPTS,
) -> Iterator[tuple[str, Server]]:
    """Enter `start(port)` (a `CheckContext.serve` for that port) on a free port and yield
    (base URL, server) once it is ready; on a lost port race, stop it and try another port
    (`retried` hears why). Any other failure, an interrupt among them, propagates at once."""
    for attempt in range(attempts):
        last = attempt + 1 == attempts
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        with ExitStack() as stack:
            try:
                server = stack.enter_context(start(port))
            except ServerExited:
                if last or not port_taken(port):
                    raise
                retried(f"port {port} was taken before the server bound it; trying another")
                continue
            time.sleep(SETTLE_S)
            if not server.alive():
                if last:
                    raise ServerExited(
                        f"the server exited right after {base_url} answered; log {server.log}",
                        "\n".join(server.tail()[-15:]) or None,
                    )
                retried(f"the server exited right after {base_url} answered; trying another port")
                continue
            yield base_url, server
            return
    raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover
