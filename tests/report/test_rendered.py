"""What the commands read back of a report they rendered, and of a fleet's run.json, typed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qualify.cli.runentries import _candidates
from qualify.core.errors import RunStoreError
from qualify.core.runstore import RunDir
from qualify.records.run import RunRecord
from qualify.report.rendered import RenderedVerdict


def test_a_report_s_verdict_is_read_typed_and_a_wrong_one_is_named(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    report = {"schema_version": 1, "verdict": "QUALIFIED", "verdict_line": "QUALIFIED", "stages": []}
    path.write_text(json.dumps(report))
    assert RenderedVerdict.read(path).verdict == "QUALIFIED"
    path.write_text(json.dumps({**report, "verdict": None}))
    with pytest.raises(RunStoreError, match=rf"^{path}: verdict is null, not a string"):
        RenderedVerdict.read(path)
    path.write_text(json.dumps({"schema_version": 1, "verdict": "QUALIFIED"}))
    with pytest.raises(RunStoreError, match=rf"^{path}: verdict_line is missing"):
        RenderedVerdict.read(path)


def test_runs_counts_a_fleet_s_hosts_from_its_typed_record(tmp_path: Path) -> None:
    hosts = [{"key": "a", "source": "a.tar"}, {"key": "b", "source": "b.tar"}]
    record = RunRecord.parse(RunDir(tmp_path), {"kind": "fleet", "status": "complete", "hosts": hosts})
    assert _candidates(record) == "fleet of 2 hosts"
    odd = RunRecord.parse(RunDir(tmp_path), {"kind": "fleet", "hosts": [{"key": "a", "port": 1}]})
    with pytest.raises(RunStoreError, match=r"run.json: hosts\[0\].port: not a field this qualify knows"):
        _candidates(odd)
