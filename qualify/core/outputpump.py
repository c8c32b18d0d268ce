"""A child's output as qualify keeps it: pumped line by line into its log, cut where a line or
a log would grow without bound, and never left blocking the child."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import IO

from qualify.core.redaction import Unsplit

LineCallback = Callable[[str], None]

#: The longest output line kept (in logs, tails and what parsers see): a longer line is cut here
#: and says how much was cut, so one endless line cannot take the memory or fill every file.
MAX_LINE_BYTES = 64 * 1024
#: The most a log keeps of one command's output: past it lines are counted, not written.
MAX_LOG_BYTES = 512 * 1024 * 1024
#: The most kept of a data stdout (`separate_stdout`); the rest is read and dropped.
MAX_STDOUT_BYTES = 64 * 1024 * 1024


def _lines(stream: IO[bytes]) -> Iterator[str]:
    """The stream's lines, each cut at MAX_LINE_BYTES (what follows up to the newline is read
    and dropped, and the line says how much)."""
    while True:
        raw = stream.readline(MAX_LINE_BYTES)
        if not raw:
            return
        if len(raw) == MAX_LINE_BYTES and not raw.endswith(b"\n"):
            dropped = 0
            while True:
                more = stream.readline(1024 * 1024)
                if not more:
                    break
                dropped += len(more)
                if more.endswith(b"\n"):
                    dropped -= 1
                    break
            text = raw.decode("utf-8", errors="replace")
            yield f"{text} [line cut at {MAX_LINE_BYTES} bytes: {dropped} more bytes dropped]\n"
            continue
        yield raw.decode("utf-8", errors="replace")


def read_bounded(stream: IO[bytes], into: list[bytes]) -> None:
    """Read `stream` to its end, keeping at most MAX_STDOUT_BYTES (the child is never left
    blocked on a full pipe)."""
    kept = 0
    while chunk := stream.read(1024 * 1024):
        if kept < MAX_STDOUT_BYTES:
            into.append(chunk[: MAX_STDOUT_BYTES - kept])
            kept += len(into[-1])


class Pump(threading.Thread):
    """Copies a child's output to the log and callbacks, keeping a tail for error messages.

    It always reads the pipe to its end: a log that cannot be written (a full disk) stops the
    writing, not the reading, so the child never blocks on a full pipe; the error is kept for
    the caller to raise once the child ended."""

    def __init__(
        self, stream: IO[bytes], log: IO[str] | None, callbacks: Sequence[LineCallback], tail: int
    ) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.log = log
        self.callbacks = callbacks
        self.tail: deque[str] = deque(maxlen=tail)
        self.write_error: OSError | None = None
        self.written = 0
        self.unwritten = 0

    def run(self) -> None:
        # A secret the child was given and prints (in any encoding, or split over two lines) is
        # kept neither in its log nor in the tail that error messages and measurements quote;
        # the callbacks parse each line as it is, when it is read.
        unsplit = Unsplit()
        for line in _lines(self.stream):
            for kept in unsplit.feed(line):
                self._keep(kept)
            text = line.rstrip("\n")
            for callback in self.callbacks:
                callback(text)
        for kept in unsplit.close():
            self._keep(kept)
        if self.unwritten and self.log is not None and self.write_error is None:
            cap = f"the log's cap is {MAX_LOG_BYTES} bytes"
            self._write(f"# {self.unwritten} more bytes of output not kept ({cap})\n", own=True)

    def _keep(self, line: str) -> None:
        self._write(line)
        self.tail.append(line.rstrip("\n"))

    def _write(self, text: str, *, own: bool = False) -> None:
        """Append to the log; the child's text (not `own`) only while the log is under its cap."""
        if self.log is None or self.write_error is not None:
            return
        if not own and self.written + len(text) > MAX_LOG_BYTES:
            self.unwritten += len(text)
            return
        try:
            self.log.write(text)
            self.log.flush()
            self.written += len(text)
        except OSError as exc:
            self.write_error = exc
