"""The run's record of its process groups (processes.jsonl): written and read through
`GroupRecord`, and a line qualify did not write as it is ends nothing."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from qualify.core import proctree
from qualify.core.errors import RunStoreError
from qualify.core.groups import GroupRecord, GroupWatch, boot_id, end_recorded_groups, recording_groups


@pytest.fixture
def leader() -> Iterator[subprocess.Popen[bytes]]:
    """A process that leads its own session and group, as qualify starts every command."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    deadline = time.monotonic() + 10
    while (entry := proctree.entry(proc.pid)) is None or entry.session != proc.pid:
        assert time.monotonic() < deadline, "the child did not lead its own session"
        time.sleep(0.02)
    yield proc
    proc.kill()
    proc.wait()


def test_a_watched_group_is_recorded_as_a_group_record(
    tmp_path: Path, leader: subprocess.Popen[bytes]
) -> None:
    log = tmp_path / "processes.jsonl"
    with recording_groups(log):
        watch = GroupWatch(leader.pid, ["sleep", "60", "a", "b", "c", "d", "e", "f", "g"])
    watch.release()
    (line,) = log.read_text().splitlines()
    record = GroupRecord.read(json.loads(line), f"{log}:1")
    entry = proctree.entry(leader.pid)
    assert entry is not None
    assert (record.pgid, record.start, record.boot) == (leader.pid, entry.start, boot_id())
    assert record.argv == ("sleep", "60", "a", "b", "c", "d", "e", "f")  # the first eight words
    assert record.mark is None and record.cgroup is None


def test_a_wrong_field_is_refused_naming_the_line_and_the_key() -> None:
    with pytest.raises(RunStoreError, match=r"p/processes.jsonl:3: pgid is str, not a process group id"):
        GroupRecord.read({"pgid": "12", "argv": []}, "p/processes.jsonl:3")
    with pytest.raises(RunStoreError, match=r"p/processes.jsonl:1: signal: not a field this qualify knows"):
        GroupRecord.read({"pgid": 12, "signal": 9}, "p/processes.jsonl:1")
    with pytest.raises(RunStoreError, match=r"p/processes.jsonl:2: argv is list, not a list of words"):
        GroupRecord.read({"pgid": 12, "argv": ["make", 3]}, "p/processes.jsonl:2")
    with pytest.raises(RunStoreError, match=r"p/processes.jsonl:4: pgid is missing"):
        GroupRecord.read({"start": 12}, "p/processes.jsonl:4")
    with pytest.raises(RunStoreError, match=r"p/processes.jsonl:5: start is bool, not a start time"):
        GroupRecord.read({"pgid": 12, "start": True}, "p/processes.jsonl:5")


def test_only_a_record_as_qualify_writes_it_ends_its_group(
    tmp_path: Path, leader: subprocess.Popen[bytes]
) -> None:
    entry = proctree.entry(leader.pid)
    assert entry is not None
    good = {"pgid": leader.pid, "start": entry.start, "boot": boot_id(), "argv": ["sleep", "60"]}
    wrong = [
        {**good, "pgid": str(leader.pid)},  # a number as text
        {**good, "start": float(entry.start)},
        {**good, "argv": "sleep 60"},
        {**good, "signal": 9},  # a key qualify does not write
        {**good, "boot": "another boot"},
        [leader.pid],
    ]
    log = tmp_path / "processes.jsonl"
    log.write_text("not json\n" + "".join(json.dumps(r) + "\n" for r in wrong))
    assert end_recorded_groups(log) == []
    assert leader.poll() is None and not log.exists()
    log.write_text(json.dumps(good) + "\n")
    assert end_recorded_groups(log) == [f"group {leader.pid} (sleep 60: 1 processes)"]
    assert leader.wait(timeout=10) is not None


def test_a_record_of_an_older_qualify_reads_with_what_it_meant() -> None:
    """Before the cgroups and marks a line held the group, its leader's start and its words."""
    record = GroupRecord.read({"pgid": 7, "start": 99, "argv": ["make"]}, "p.jsonl:1")
    assert record == GroupRecord(7, start=99, argv=("make",))
    assert GroupRecord.read({"pgid": 7}, "p.jsonl:1").argv is None
