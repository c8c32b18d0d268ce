"""One inference server per role: started from the plan's template on a free loopback port,
waited on through `/health`, described by `/props`, always torn down.

The process itself goes through `CheckContext.serve` (the one runner: own process group, log
file, group killed on exit, on Ctrl-C and on a failing suite); `qualify.core.loopback` picks
the port, and starts the server again on another when its port was taken meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError, ToolMissing
from qualify.core.loopback import answers, on_free_port
from qualify.core.process import Server
from qualify.records.serving import ServerRecord
from qualify.serving.client import Client, ServerGone


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

    def describe(self) -> ServerRecord:
        """What is saved about the server: build, slots, context, how long it took to start."""
        settings = self.props.get("default_generation_settings") or {}
        return ServerRecord(
            base_url=self.base_url,
            argv=self.process.recorded_argv(),
            log=str(self.log),
            ready_after_s=round(self.started_s, 3),
            build_info=self.props.get("build_info"),
            total_slots=self.props.get("total_slots"),
            n_ctx=settings.get("n_ctx"),
            model_path=self.props.get("model_path"),
            chat_template_caps=self.props.get("chat_template_caps"),
        )


@contextmanager
def role_server(
    ctx: CheckContext, role: str, template: str, *, ready_timeout_s: float, request_timeout_s: float
) -> Iterator[RoleServer]:
    """Start `template` for `role` (with `{port}` filled), yield it ready, always stop it."""
    started = time.monotonic()
    ctx.argv(template, role, port="0")  # a template the plan got wrong fails here, as the plan's error

    def start(port: int) -> AbstractContextManager[Server]:
        url = f"http://127.0.0.1:{port}/health"
        return ctx.serve(
            role, ctx.argv(template, role, port=str(port)), lambda: answers(url), ready_timeout_s
        )

    with ExitStack() as stack:
        try:
            base_url, server = stack.enter_context(
                on_free_port(start, retried=lambda why: ctx.echo(f"{role}: {why}"))
            )
        except ToolMissing as exc:
            raise ServerStartFailed(exc.message, [], missing=True) from None
        except QualifyError as exc:
            raise ServerStartFailed(exc.message, (exc.hint or "").splitlines()) from None
        client = stack.enter_context(closing(Client(base_url, request_timeout_s, server.alive)))
        running = RoleServer(role, base_url, server, client, ctx.log(role, "server"))
        running.started_s = time.monotonic() - started
        try:
            props = client.get("/props")
        except ServerGone:
            raise ServerStartFailed("the server exited while /props was read", running.tail()) from None
        running.props = props.json if props.status == 200 else {}
        yield running
