"""The application watchdog: an in-flight request whose stream makes no progress for `stall_s`
seconds is a stall, whatever the kernel log says.

Silent GPU hangs with nothing in the kernel log have been reported (ROCm/legacy-rocm-build
#6630, #6437), so stream progress is watched at the application level. Progress is any bytes
of the response arriving, counted from when the request was sent; the clock is injected so the
rule can be tested without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Watchdog:
    """Last-progress times of in-flight requests, and which are overdue."""

    stall_s: float
    clock: Callable[[], float] = time.monotonic
    _last: dict[int, float] = field(default_factory=dict)

    def start(self, index: int) -> None:
        self._last[index] = self.clock()

    def progress(self, index: int) -> None:
        if index in self._last:
            self._last[index] = self.clock()

    def finish(self, index: int) -> None:
        self._last.pop(index, None)

    def in_flight(self) -> int:
        return len(self._last)

    def overdue(self) -> list[tuple[int, float]]:
        """(request, seconds without progress) for every request silent longer than `stall_s`."""
        now = self.clock()
        return [(i, now - t) for i, t in sorted(self._last.items()) if now - t > self.stall_s]
