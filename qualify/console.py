"""Rich output: the live stage log of a run, stage chains and plan tables."""

from __future__ import annotations

import json
import threading
import time

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from qualify.checks.base import Judgement
from qualify.checks.registry import kind_named
from qualify.pipeline.plan import Plan, StageSpec
from qualify.pipeline.runner import Events

STYLE = {
    "PASS": "green",
    "WARN": "yellow",
    "INCONCLUSIVE": "dark_orange",
    "FAIL": "bold red",
    "ERROR": "magenta",
    "SKIPPED": "grey50",
    "BLOCKED": "grey50",
    "NOT CONFIGURED": "grey50",
    "NOT RUN": "grey50",
    "INTERRUPTED": "magenta",
    "STALE": "yellow",
    "QUALIFIED": "bold green",
    "NOT QUALIFIED": "bold red",
    "INCOMPLETE": "bold yellow",
}


def badge(value: str) -> str:
    return f"[{STYLE.get(value, 'white')}]{escape(value)}[/]"


#: Off a terminal (a CI log), a line at least this often while a stage works in silence.
HEARTBEAT_S = 30.0


class ConsoleEvents(Events):
    def __init__(self, console: Console, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.console = console
        self._status: Status | None = None
        self._shown = 0.0
        self._heartbeat_s = heartbeat_s
        self._latest: str | None = None
        self._stage: tuple[str, float] | None = None  # (name, start)
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _beating(self) -> None:
        # A CI log shows nothing for the minutes of a build or a soak block otherwise.
        while not self._stop.wait(self._heartbeat_s):
            if self._stage is None:
                continue
            name, start = self._stage
            doing = f": {self._latest}" if self._latest else ""
            line = f"{name} still running, {time.monotonic() - start:.0f} s so far{doing}"
            self.console.print(
                f"  [dim]{escape(line)}[/]",
                highlight=False,
                soft_wrap=True,
            )

    def progress(self, text: str | None) -> None:
        self._latest = text
        if text is None:
            if self._status is not None:
                self._status.stop()
                self._status = None
            return
        if not self.console.is_terminal:
            return  # a log file gets the echoed lines and the heartbeat, not a spinner
        now = time.monotonic()
        if self._status is None:
            self._status = self.console.status(escape(text))
            self._status.start()
        elif now - self._shown > 0.2:  # a compiler's output can be thousands of lines a second
            self._status.update(escape(text))
        self._shown = now

    def echo(self, line: str) -> None:
        self.console.print(f"  [dim]{escape(line)}[/]", highlight=False, soft_wrap=True)

    def stage_start(self, stage: StageSpec, note: str) -> None:
        extra = f"  [yellow]{escape(note)}[/]" if note else ""
        self.console.rule(f"[bold]{escape(stage.folder)}[/]{extra}", align="left")
        self._stage = (stage.name, time.monotonic())
        if not self.console.is_terminal and self._beat is None:
            self._beat = threading.Thread(target=self._beating, daemon=True)
            self._beat.start()

    def stage_end(self, stage: StageSpec, outcome: str, reason: str) -> None:
        self._stage = None
        self.console.print(
            f"[bold]{escape(stage.name)}[/]: {badge(outcome)}  {escape(reason)}", highlight=False
        )

    def check_end(self, stage: str, check: str, judgement: Judgement) -> None:
        self.console.print(
            f"  {escape(check)}: {badge(judgement.verdict.value)}  {escape(judgement.reason)}",
            highlight=False,
        )


def toml_value(value: object) -> str:
    """A value as it would be written in a stage file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return str(value)


def plan_text(plan: Plan) -> str:
    """The resolved plan as indented lines (readable at 80 columns), values in TOML syntax."""
    lines = [f"plan {plan.source}" + (f" (profile {plan.profile})" if plan.profile else "")]
    for stage in plan.stages:
        gate = "  (inconclusive → warn)" if stage.inconclusive_as_warn else ""
        lines.append(f"{stage.folder}{gate}")
        for check in stage.checks:
            builds = kind_named(check.kind, check.name).builds_arms
            roles = "every role of the run" if builds else ", ".join(check.roles)
            lines.append(f"  {check.name}  [{check.kind}]  roles: {roles}")
            params = {k: v for k, v in check.params.items() if v not in (None, False, [], {})}
            if check.limits:
                lines.append(f"    limits = {toml_value(dict(check.limits))}")
            lines += [f"    {k} = {toml_value(v)}" for k, v in params.items()]
            lines += [f"    vars.{k} = {toml_value(v)}" for k, v in check.vars.items()]
    lines += [f"{name}  NOT CONFIGURED" for name in plan.not_configured()]
    return "\n".join(lines)
