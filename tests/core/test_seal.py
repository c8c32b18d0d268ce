"""seal.json is written and read through `SealDocument`, authenticated with qualify's key, and
every file of a check's folder is sealed with the records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qualify.core import sealkey
from qualify.core.errors import RunStoreError
from qualify.records import seal
from qualify.records.seal import SealDocument, Trust, sealing, stage_problem, state_of


@pytest.fixture(autouse=True)
def own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A key of this test's own, in a state folder of its own."""
    state = tmp_path / "state"
    monkeypatch.setenv(sealkey.ENV, str(state))
    return state


def sealed_run(tmp_path: Path) -> Path:
    """A run folder with one stage whose check left a measurement, sealed as a run seals it."""
    run = tmp_path / "run"
    record = run / "10-build" / "stage.json"
    data = run / "10-build" / "check" / "pinned" / "measurement.json"
    data.parent.mkdir(parents=True)
    with sealing(run):
        record.write_text('{"status": "complete"}')
        seal.note(record)
        data.write_text('{"samples": [1, 2, 3]}')
        seal.note_folder(data.parent.parent)
    return record


def test_a_seal_reads_back_as_written_and_finds_a_changed_record(tmp_path: Path) -> None:
    record = sealed_run(tmp_path)
    run = record.parent.parent
    saved = json.loads((run / "seal.json").read_text())
    document = SealDocument.read(saved, run / "seal.json")
    assert sorted(document.records) == ["10-build/check/pinned/measurement.json", "10-build/stage.json"]
    assert document.records["10-build/stage.json"] == seal.digest(record)
    assert state_of(run).trust is Trust.VERIFIED
    assert stage_problem(record.parent, [record], run)[0] is None
    record.write_text('{"status": "complete", "verdict": "PASS"}')
    problem, _ = stage_problem(record.parent, [record], run)
    assert problem is not None and problem.startswith("tampered") and str(record) in problem


def test_a_measurement_changed_or_a_file_added_later_is_found(tmp_path: Path) -> None:
    """Not only the records: a check's data, and a file nobody sealed."""
    record = sealed_run(tmp_path)
    run = record.parent.parent
    data = run / "10-build" / "check" / "pinned" / "measurement.json"
    data.write_text('{"samples": [9, 9, 9]}')
    assert "measurement.json" in str(stage_problem(record.parent, [record], run)[0])
    data.write_text('{"samples": [1, 2, 3]}')
    assert stage_problem(record.parent, [record], run)[0] is None
    extra = data.parent / "more.parquet"
    extra.write_bytes(b"forged")
    assert "more.parquet" in str(stage_problem(record.parent, [record], run)[0])


@pytest.mark.parametrize("how", ["recomputed", "deleted", "emptied", "malformed", "key of another host"])
def test_a_seal_made_again_without_the_key_is_not_taken(
    tmp_path: Path, how: str, own_key: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The digests written again to match an edit (anyone can compute one) break the MAC; a
    seal deleted, emptied or cut short is no seal; one made with another key is not this
    host's to vouch for."""
    record = sealed_run(tmp_path)
    run = record.parent.parent
    path = run / "seal.json"
    record.write_text('{"status": "complete", "verdict": "PASS"}')
    document = json.loads(path.read_text())
    if how == "recomputed":
        document["records"]["10-build/stage.json"] = seal.digest(record)
        path.write_text(json.dumps(document))
    elif how == "deleted":
        path.unlink()
    elif how == "emptied":
        path.write_text("")
    elif how == "malformed":
        path.write_text(path.read_text()[:40])
    else:
        monkeypatch.setenv(sealkey.ENV, str(tmp_path / "other-host"))
    problem, state = stage_problem(record.parent, [record], run)
    assert state.trust is not Trust.VERIFIED, state
    if how in ("recomputed", "emptied", "malformed"):
        assert state.trust is Trust.BROKEN and problem is not None and problem.startswith("not sealed"), (
            problem
        )
    else:
        # Not made in a runs directory of this host: read as made elsewhere, never verified.
        assert state.trust is Trust.ELSEWHERE and "not verifiable here" in state.words, state


def test_a_wrong_field_is_refused_naming_the_file_and_the_key() -> None:
    with pytest.raises(RunStoreError, match=r"r/seal.json: records.a/stage.json is int, not a digest"):
        SealDocument.read({"schema_version": 1, "records": {"a/stage.json": 12}}, "r/seal.json")
    with pytest.raises(RunStoreError, match=r"r/seal.json: digests: not a field this qualify knows"):
        SealDocument.read({"records": {}, "digests": {}}, "r/seal.json")
    with pytest.raises(RunStoreError, match=r"r/seal.json: records is missing"):
        SealDocument.read({"schema_version": 1}, "r/seal.json")
    with pytest.raises(RunStoreError, match=r"r/seal.json: mac is int, not text"):
        SealDocument.read({"schema_version": 2, "records": {}, "key": "k", "mac": 5}, "r/seal.json")


def test_the_key_is_this_users_alone(tmp_path: Path, own_key: Path) -> None:
    key = sealkey.load(create=True)
    assert key is not None and len(key) == 32
    path = own_key / "qualify" / sealkey.KEY
    assert path.stat().st_mode & 0o777 == 0o600
    assert (own_key / "qualify").stat().st_mode & 0o077 == 0


def sealed_on_disk(run: Path) -> list[str]:
    if not (run / "seal.json").is_file():
        return []
    return sorted(json.loads((run / "seal.json").read_text())["records"])


def test_what_is_noted_in_a_deferred_block_is_saved_once_as_the_outermost_ends(tmp_path: Path) -> None:
    """A check's folder, its result and its stage's record are sealed together as it ends."""
    run = tmp_path / "run"
    check = run / "10-build" / "check"
    (check / "pinned").mkdir(parents=True)
    record = run / "10-build" / "stage.json"
    with sealing(run):
        with seal.deferred():
            (check / "pinned" / "measurement.json").write_text("{}")
            seal.note_folder(check)
            with seal.deferred():
                record.write_text('{"status": "running"}')
                seal.note(record)
            assert sealed_on_disk(run) == []  # the outer block has not ended
        assert sealed_on_disk(run) == ["10-build/check/pinned/measurement.json", "10-build/stage.json"]
        with pytest.raises(KeyboardInterrupt), seal.deferred():
            (check / "result.json").write_text("{}")
            seal.note(check / "result.json")
            raise KeyboardInterrupt
        assert "10-build/check/result.json" in sealed_on_disk(run)  # saved though the block was stopped
        record.write_text('{"status": "complete"}')
        seal.note(record)  # outside a block: saved at once
        assert (
            seal.digest(record)
            == json.loads((run / "seal.json").read_text())["records"]["10-build/stage.json"]
        )
    assert stage_problem(record.parent, [record], run)[0] is None


def test_a_file_changed_after_it_was_sealed_stops_the_run_whatever_its_signature_cache(
    tmp_path: Path,
) -> None:
    """The comparison after each check reads a file again only where its inode, size or times
    moved, and then finds a changed content; an unchanged one is read no more."""
    run = tmp_path / "run"
    data = run / "10-build" / "check" / "pinned" / "measurement.json"
    data.parent.mkdir(parents=True)
    with sealing(run):
        data.write_text('{"samples": [1]}')
        seal.note_folder(data.parent.parent)
        seal.check()
        data.write_text('{"samples": [1]}')  # the same bytes again: its times moved, its digest did not
        seal.check()
        data.write_text('{"samples": [9]}')
        with pytest.raises(seal.Tampered, match="measurement.json"):
            seal.check()


def continued_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_key: Path, *, key_carried: bool
) -> Path:
    """A run sealed on one host, then continued (a second stage written) on another: a GPU lease
    resumes the run a lease before it wrote out."""
    first = sealed_run(tmp_path)
    run = first.parent.parent
    other = tmp_path / "other-host"
    if key_carried:  # as the CUDA example's pack.sh --run and host.sh carry it
        (other / "qualify").mkdir(parents=True, mode=0o700)
        (other / "qualify" / sealkey.KEY).write_bytes((own_key / "qualify" / sealkey.KEY).read_bytes())
        (other / "qualify" / sealkey.KEY).chmod(0o600)
    monkeypatch.setenv(sealkey.ENV, str(other))
    second = run / "20-compile" / "stage.json"
    second.parent.mkdir()
    with sealing(run):
        second.write_text('{"status": "complete"}')
        seal.note(second)
    return first


def test_a_run_continued_on_another_host_vouches_only_for_what_that_host_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_key: Path
) -> None:
    first = continued_elsewhere(tmp_path, monkeypatch, own_key, key_carried=False)
    run = first.parent.parent
    problem, _ = stage_problem(first.parent, [first], run)
    assert problem is not None and problem.startswith("not sealed"), problem
    assert stage_problem(run / "20-compile", [run / "20-compile" / "stage.json"], run)[0] is None


def test_with_the_first_hosts_key_carried_over_its_stages_still_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_key: Path
) -> None:
    first = continued_elsewhere(tmp_path, monkeypatch, own_key, key_carried=True)
    run = first.parent.parent
    assert stage_problem(first.parent, [first], run)[0] is None
    assert state_of(run).trust is Trust.VERIFIED
