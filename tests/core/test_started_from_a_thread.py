"""A command started from a worker thread outlives that thread (a bench block starts its servers
side by side from a pool): bubblewrap's `--die-with-parent` ends the command when the *thread*
that started it ends, so qualify starts children from a thread that lasts as long as it does.

Real bubblewrap and kernel namespaces; qualify's containment as `qualify run` sets it up, as
root with commands dropped to nobody. Nothing stands in for anything.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from jails import as_nobody

from qualify.core import children, containment


@pytest.fixture
def jail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[containment.Jail]:
    with as_nobody(tmp_path / "run", monkeypatch, "threads") as made:
        yield made


def test_a_child_started_from_a_thread_lives_on_after_the_thread_ends(jail: containment.Jail) -> None:
    started: list[children.Child] = []

    def start_and_wait() -> None:
        started.append(children.spawn(["sleep", "30"], env=dict(os.environ), cwd=None, stdin=None))
        # As a server's start waits for it to answer: bubblewrap has set its parent-death
        # signal by then (a thread that ended at once would be gone before it did so).
        time.sleep(1.0)

    worker = threading.Thread(target=start_and_wait)
    worker.start()
    worker.join()
    assert not worker.is_alive() and started
    child = started[0]
    try:
        time.sleep(1.0)  # bubblewrap's parent-death signal comes as soon as the thread is gone
        assert child.proc.poll() is None, (
            f"the child ended with the thread that started it: {child.proc.returncode}"
        )
    finally:
        child.end(grace_s=1.0)
        child.close()
    assert child.proc.poll() is not None


def test_a_child_started_from_the_main_thread_is_started_there(jail: containment.Jail) -> None:
    child = children.spawn(["sleep", "30"], env=dict(os.environ), cwd=None, stdin=None)
    try:
        time.sleep(0.5)
        assert child.proc.poll() is None
    finally:
        child.end(grace_s=1.0)
        child.close()
