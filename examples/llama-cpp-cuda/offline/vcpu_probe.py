"""How fast each of the host's CPUs runs, window by window, with every CPU busy at once: run on
the GPU host to see whether its virtual CPUs run at two speeds, and whether they switch together.

    python3 examples/llama-cpp-cuda/offline/vcpu_probe.py OUT.json [SECONDS]

One process per CPU, each pinned to its CPU, counts a fixed Python loop in 0.1-s windows for
SECONDS (6). It writes every CPU's counts as JSON and prints, per CPU, the share of its windows
in the fast state (above the midpoint of the slowest and fastest window of all) and the windows
in order (F fast, s slow), then the share of windows in which every CPU was in the same state.
"""

from __future__ import annotations

import json
import os
import sys
import time
from multiprocessing import Process, Queue
from pathlib import Path


def probe(cpu: int, results: Queue, seconds: float, window: float = 0.1) -> None:  # type: ignore[type-arg]
    os.sched_setaffinity(0, {cpu})
    end = time.monotonic() + seconds
    counts = []
    while time.monotonic() < end:
        start, n = time.monotonic(), 0
        while time.monotonic() - start < window:
            for _ in range(1000):
                pass
            n += 1
        counts.append(n)
    results.put((cpu, counts))


def main(out: str, seconds: float) -> None:
    results: Queue = Queue()  # type: ignore[type-arg]
    cpus = sorted(os.sched_getaffinity(0))
    workers = [Process(target=probe, args=(cpu, results, seconds)) for cpu in cpus]
    for w in workers:
        w.start()
    counts = dict(results.get() for _ in workers)
    for w in workers:
        w.join()
    Path(out).write_text(json.dumps(counts))
    every = sorted(v for series in counts.values() for v in series)
    cut = (every[0] + every[-1]) / 2
    for cpu in cpus:
        states = "".join("F" if v > cut else "s" for v in counts[cpu])
        print(cpu, f"fast {states.count('F') / len(states):.2f}", states[:60])
    n = min(len(series) for series in counts.values())
    alike = sum(len({counts[c][i] > cut for c in cpus}) == 1 for i in range(n))
    print(f"windows with every CPU alike: {alike / n:.2f}")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) == 3 else 6.0)
