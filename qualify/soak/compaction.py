"""Memory pressure during a soak: `1` written to `/proc/sys/vm/compact_memory` on a schedule.

Writing the file compacts every zone synchronously (kernel commit 76ab0f530e4a,
Documentation/admin-guide/sysctl/vm.rst); the bcc `compactsnoop` example shows ~114 ms per
ZONE_NORMAL pass, so latency spikes are expected in both roles, which is why both get the same
schedule (offsets from the role's start). When the write is not permitted the soak goes on
without pressure: `permitted` turns false, the reason is kept, and the check can then be WARN
at best.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

COMPACT_MEMORY = Path("/proc/sys/vm/compact_memory")


def schedule(start_s: float, every_s: float, end_s: float) -> list[float]:
    """Offsets at which to compact: `start_s`, then every `every_s`, before `end_s` (none when
    `every_s` is 0: pressure disabled by the plan)."""
    if every_s <= 0:
        return []
    times: list[float] = []
    t = start_s
    while t < end_s:
        times.append(round(t, 3))
        t += every_s
    return times


class Compactor:
    """Writes `path` at each offset of `times` (seconds after `t0`) on a thread."""

    def __init__(self, times: list[float], t0: float, path: Path = COMPACT_MEMORY) -> None:
        self.times = times
        self.t0 = t0
        self.path = path
        self.events: list[dict[str, Any]] = []
        self.permitted: bool | None = None  # unknown until the first write
        self.reason: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def compact(self) -> None:
        started = time.monotonic()
        try:
            self.path.write_text("1\n")
        except OSError as exc:
            self.permitted = False
            self.reason = f"writing {self.path}: {exc.strerror or exc}"
            return
        self.permitted = True
        self.events.append(
            {"t_s": round(started - self.t0, 3), "duration_s": round(time.monotonic() - started, 4)}
        )

    def _run(self) -> None:
        for offset in self.times:
            if self._stop.wait(max(0.0, self.t0 + offset - time.monotonic())):
                return
            self.compact()
            if self.permitted is False:
                return

    def as_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "planned": self.times,
            "permitted": self.permitted,
            "reason": self.reason,
            "events": self.events,
        }

    def __enter__(self) -> Compactor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
