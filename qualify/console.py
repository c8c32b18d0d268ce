"""Rich output: what a run shows while it works, and the consoles every command prints with.

Off a terminal (a CI log) a run prints a plain line at every step and, while a stage works in
silence, a heartbeat line every 30 s (elapsed, and the check's counts or time left when it told
them). On a terminal the same lines scroll above a live display (`LiveView`): stage, check, role,
elapsed, the check's planned steps done (derivations, pairs, runs) or its time left, and the
newest status line.

Off a terminal nothing is wrapped at a width and no line is padded (`open_console`): a CI log keeps
each line whole and a run id or a path stays copyable. Text from outside (engine output, test
names, reasons quoting them) goes through `plain` first: control sequences cannot move a
terminal's cursor or retitle it, and no line can begin a CI workflow command.

rich is imported where it is used, never when this module is: `qualify --version` and `--help`
import this module and print nothing through rich.
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import IO, TYPE_CHECKING, TextIO, cast

from qualify.core.plaintext import clean
from qualify.pipeline.events import Events

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live
    from rich.spinner import Spinner

    from qualify.checks.base import Judgement
    from qualify.core.progress import Progress
    from qualify.pipeline.plan import StageSpec

log = logging.getLogger(__name__)

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
    "UNREADABLE": "magenta",
    "QUALIFIED": "bold green",
    "NOT QUALIFIED": "bold red",
    "INCOMPLETE": "bold yellow",
}


def badge(value: str) -> str:
    from rich.markup import escape

    return f"[{STYLE.get(value, 'white')}]{escape(value)}[/]"


# GitHub's runner reads a line as a workflow command when, leading blanks trimmed, it starts
# with "::" (`::error::`, `::add-mask::`, `::stop-commands::`), or when it holds "##[" anywhere
# (the older form).
_COMMAND = re.compile(r"^(\s*):(?=:)", re.M)


def plain(text: str) -> str:
    """Outside text made safe to print: control sequences and characters, bidirectional
    controls and zero-width characters removed (`qualify.core.plaintext.clean`), and a line that
    a CI runner would take for a workflow command broken up (`: :error::`, `# #[`)."""
    return _COMMAND.sub(r"\1: ", clean(text)).replace("##[", "# #[")


def safe(text: str) -> str:
    """Outside text for rich's markup: made `plain`, then its brackets escaped."""
    from rich.markup import escape

    return escape(plain(text))


#: Off a terminal, the width rich lays tables out in: wide enough that no cell is ever cut.
UNBOUNDED = 100_000


def reader_left(stream: TextIO) -> None:
    """The reader of a pipe has gone (`| head -1`): what is still buffered, and anything
    written later, goes to /dev/null instead of failing again when Python exits."""
    with suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())


class _Trimmed(io.TextIOBase):
    """A stream that writes whole lines without their trailing blanks (rich pads a table's
    cells to the column's width; a log needs none of it)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._pending = ""
        self._gone = False  # the pipe's reader left: the rest is not written

    def writable(self) -> bool:
        return True

    # typeshed declares `encoding` a plain attribute; io's own is a read-only descriptor.
    @property
    def encoding(self) -> str:  # type: ignore[override]
        # rich draws a table's borders in ASCII where the stream's encoding is not UTF.
        return getattr(self._stream, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        if lines:
            self._send("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        pending, self._pending = self._pending, ""
        self._send(pending, flush=True)

    def _send(self, text: str, *, flush: bool = False) -> None:
        # A reader that stops early (`| head -1`) must not stop the command: a run goes on to
        # its verdict and exits with its code; a listing ends as if it had printed it all.
        if self._gone:
            return
        try:
            self._stream.write(text)
            if flush:
                self._stream.flush()
        except BrokenPipeError:
            self._gone = True
            reader_left(self._stream)


#: The width a table is drawn in off a terminal: the console itself never wraps there, and a
#: table would grow to its longest cell (a compiler's version line, a path).
PIPED_TABLE_WIDTH = 100


def open_console(*, stderr: bool = False) -> Console:
    """The console a command prints with: rich's own on a terminal; off one (a CI log, a pipe, a
    file) one that never wraps at a width, never pads a line, never colours and never draws a
    live display (even where FORCE_COLOR asks rich to act as if on a terminal)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    trimmed = cast(IO[str], _Trimmed(stream))  # a text stream: what rich writes to
    return Console(file=trimmed, width=UNBOUNDED, soft_wrap=True, force_terminal=False, emoji=False)


#: Off a terminal (a CI log), a line at least this often while a stage works in silence.
HEARTBEAT_S = 30.0


def clock(seconds: float) -> str:
    """1:05, 1:02:03."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def told(progress: Progress, since_s: float, seconds: Callable[[float], str]) -> str:
    """What a check told of its progress, `since_s` ago: "candidate 12/40 derivations"."""
    parts = [progress.role or "", progress.counts()]
    if progress.left_s is not None:
        parts.append(f"about {seconds(progress.left_s - since_s)} left")
    return " ".join(p for p in parts if p)


class LiveView:
    """The live display of a run on a terminal, drawn by rich's `Live` while a stage works.

    It must never stop a run: the first exception, in an update or in rendering, is logged once
    and turns the display off for the rest of the run.
    """

    REFRESH_S = 0.2  # a compiler's output can be thousands of status lines a second

    def __init__(self, console: Console) -> None:
        self.console = console
        self.stage: str | None = None
        self.check: str | None = None
        self.stage_t0 = self.check_t0 = time.monotonic()
        self.told: tuple[Progress, float] | None = None  # and when
        self.status: str | None = None
        self.broken = False
        self._live: Live | None = None
        self._spinner: Spinner | None = None
        self._shown = 0.0

    def stage_start(self, name: str) -> None:
        def start() -> None:
            from rich.live import Live

            self.stage, self.check, self.told, self.status = name, None, None, None
            self.stage_t0 = time.monotonic()
            self._live = Live(
                console=self.console,
                get_renderable=self._renderable,
                refresh_per_second=4,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start(refresh=True)

        self._safely(start)

    def check_start(self, name: str) -> None:
        def start() -> None:
            self.check, self.told, self.status = name, None, None
            self.check_t0 = time.monotonic()
            self._refresh()

        self._safely(start)

    def advance(self, progress: Progress) -> None:
        def update() -> None:
            self.told = (progress, time.monotonic())
            self._refresh()

        self._safely(update)

    def show_status(self, text: str | None) -> None:
        def update() -> None:
            self.status = text
            now = time.monotonic()
            if text is None or now - self._shown > self.REFRESH_S:
                self._refresh()
                self._shown = now

        self._safely(update)

    def stop(self) -> None:
        self._safely(self._stop)

    def render(self) -> RenderableType:
        from rich.console import Group
        from rich.spinner import Spinner
        from rich.text import Text

        now = time.monotonic()
        head = Text(" › ".join(p for p in (self.stage, self.check) if p), style="bold")
        if self.told is not None:
            progress, at = self.told
            head.append("  " + told(progress, now - at, clock), style="cyan")
        head.append(f"  {clock(now - self.check_t0 if self.check else now - self.stage_t0)}", style="dim")
        if self.check and self.stage:
            head.append(f" (stage {clock(now - self.stage_t0)})", style="dim")
        if self._spinner is None:
            self._spinner = Spinner("dots")  # one instance: its frame follows the time it started
        self._spinner.update(text=head)
        lines: list[RenderableType] = [self._spinner]
        if self.status:
            lines.append(Text("  " + plain(self.status), style="dim", no_wrap=True, overflow="ellipsis"))
        return Group(*lines)

    def _renderable(self) -> RenderableType:
        # Called on rich's refresh thread: fail quietly there, the next update stops the display.
        try:
            return self.render()
        except Exception:
            from rich.text import Text

            self._fail()
            return Text("")

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def _stop(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    def _safely(self, action: Callable[[], None]) -> None:
        if not self.broken:
            try:
                action()
            except Exception:
                self._fail()
        if self.broken:
            with suppress(Exception):
                self._stop()

    def _fail(self) -> None:
        if not self.broken:
            self.broken = True
            log.warning("the live progress display failed; the run goes on without it", exc_info=True)


class ConsoleEvents(Events):
    def __init__(self, console: Console, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.console = console
        self._heartbeat_s = heartbeat_s
        self._latest: str | None = None
        self._told: tuple[Progress, float] | None = None
        self._stage: tuple[str, float] | None = None  # (name, start)
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._live = LiveView(console) if console.is_terminal else None

    def _beating(self, stop: threading.Event) -> None:
        # A CI log shows nothing for the minutes of a build or a soak block otherwise.
        while not stop.wait(self._heartbeat_s):
            if self._stage is None:
                continue
            name, start = self._stage
            now = time.monotonic()
            line = f"{name} still running, {now - start:.0f} s so far"
            counted = False
            if self._told is not None:
                progress, at = self._told
                said = told(progress, now - at, lambda s: f"{max(0.0, s):.0f} s")
                line += f", {said}" if said else ""
                counted = progress.done is not None
            # How far a counted check is says more than the newest line of its output (a
            # compiler's `|  ^~~`); that line is shown only where nothing was counted.
            if self._latest and not counted:
                line += f": {self._latest}"
            self.console.print(f"  [dim]{safe(line)}[/]", highlight=False, soft_wrap=True, emoji=False)

    def progress(self, text: str | None) -> None:
        self._latest = text
        if self._live is not None:
            self._live.show_status(text)
        # Off a terminal, a log file gets the echoed lines and the heartbeat, not a status line.

    def advance(self, progress: Progress) -> None:
        self._told = (progress, time.monotonic())
        if self._live is not None:
            self._live.advance(progress)

    def echo(self, line: str) -> None:
        self.console.print(f"  [dim]{safe(line)}[/]", highlight=False, soft_wrap=True, emoji=False)

    def stage_start(self, stage: StageSpec, note: str) -> None:
        extra = f"  [yellow]{safe(note)}[/]" if note else ""
        if self.console.is_terminal:
            self.console.rule(f"[bold]{safe(stage.folder)}[/]{extra}", align="left")
        else:  # a rule spans the width, and off a terminal there is none
            self.console.print(f"── [bold]{safe(stage.folder)}[/]{extra}", highlight=False, emoji=False)
        self._stage = (stage.name, time.monotonic())
        self._told = None
        if self._live is not None:
            self._live.stage_start(stage.name)
        elif self._beat is None:
            self._beat = threading.Thread(target=self._beating, args=(self._stop,), daemon=True)
            self._beat.start()

    def check_start(self, stage: str, check: str) -> None:
        self._told = None
        if self._live is not None:
            self._live.check_start(check)

    def stage_end(self, stage: StageSpec, outcome: str, reason: str) -> None:
        self._stage = None
        if self._live is not None:
            self._live.stop()
        self.console.print(
            f"[bold]{safe(stage.name)}[/]: {badge(outcome)}  {safe(reason)}", highlight=False, emoji=False
        )

    def check_end(self, stage: str, check: str, judgement: Judgement) -> None:
        self._told = None
        self.console.print(
            f"  {safe(check)}: {badge(judgement.verdict.value)}  {safe(judgement.reason)}",
            highlight=False,
            emoji=False,
        )

    def close(self) -> None:
        self._stage = None
        self._stop.set()
        self._stop, self._beat = threading.Event(), None
        if self._live is not None:
            self._live.stop()
