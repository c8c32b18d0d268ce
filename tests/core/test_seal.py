"""seal.json is written and read through `SealDocument`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qualify.core import seal
from qualify.core.errors import RunStoreError
from qualify.core.seal import SealDocument, sealing, tampered


def sealed_run(tmp_path: Path) -> Path:
    record = tmp_path / "10-build" / "stage.json"
    record.parent.mkdir()
    with sealing(tmp_path):
        record.write_text('{"status": "complete"}')
        seal.note(record)
    return record


def test_a_seal_reads_back_as_written_and_finds_a_changed_record(tmp_path: Path) -> None:
    record = sealed_run(tmp_path)
    saved = json.loads((tmp_path / "seal.json").read_text())
    document = SealDocument.read(saved, tmp_path / "seal.json")
    assert list(document.records) == ["10-build/stage.json"]
    assert document.records["10-build/stage.json"] == seal.digest(record)
    assert tampered([record]) == []
    record.write_text('{"status": "complete", "verdict": "PASS"}')
    assert tampered([record]) == [record]


def test_a_wrong_field_is_refused_naming_the_file_and_the_key() -> None:
    with pytest.raises(RunStoreError, match=r"r/seal.json: records.a/stage.json is int, not a digest"):
        SealDocument.read({"schema_version": 1, "records": {"a/stage.json": 12}}, "r/seal.json")
    with pytest.raises(RunStoreError, match=r"r/seal.json: digests: not a field this qualify knows"):
        SealDocument.read({"records": {}, "digests": {}}, "r/seal.json")
    with pytest.raises(RunStoreError, match=r"r/seal.json: records: missing"):
        SealDocument.read({"schema_version": 1}, "r/seal.json")
