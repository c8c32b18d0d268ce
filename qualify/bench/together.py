"""A block's units run at the same time on one CPU (`together = true`, `format = "metrics"`).

Why: where the host's speed changes from one second to the next (a virtual machine whose CPUs
it shares with other tenants: on one, a kernel ran twice as fast at times as at others,
switching within a fifth of a second), units run one after another see different hosts, and a
pair's two units mostly differ by the host's state, not by the builds. Started together and
held to one CPU, the units of a block are interleaved by the kernel's scheduler every few
milliseconds: each role's repetitions lie milliseconds from the others', and every role
samples the same stretch of the host's states.

What it asks of the engine: to time itself with its thread's CPU time
(CLOCK_THREAD_CPUTIME_ID), which does not count the slices in which the others run (a wall
clock would count them), and to run on one thread. qualify cannot see how an engine times
itself: the plan says so by asking for it. A command that changes its own CPU affinity leaves
the CPU its units were held to; nothing but its own measurement depends on that.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

#: The program that holds a command to a CPU set (util-linux, as `mount` is).
TASKSET = "taskset"


def cpu() -> int:
    """The CPU the units are held to: the last this process may use (the first takes most of
    the interrupts on a common host)."""
    return max(os.sched_getaffinity(0))


def prefix() -> tuple[list[str], str]:
    """The words that hold a command to `cpu()`, and how the block's units ran, as the schedule
    records it; no words where taskset is not installed (the units then share every CPU)."""
    found = shutil.which(TASKSET)
    if found is None:
        return [], "units together on every CPU (taskset not found, so not held to one)"
    held = cpu()
    return [found, "--cpu-list", str(held)], f"units together on CPU {held}"


def at_once(start: Callable[[int], T], count: int) -> list[T]:
    """`start(0)` to `start(count - 1)`, each on a thread of its own, all at once; their
    results in that order once every one has returned."""
    with ThreadPoolExecutor(count, thread_name_prefix="bench-unit") as pool:
        return list(pool.map(start, range(count)))
