"""How a role's run went, as its type: every measurement.json of a recorded run (an H200's, of
every kind, written before the type existed) gives its run's part whole, and a run field that
does not hold is refused naming the file and the key, whatever kind wrote the rest. Nothing
stands in: the documents are the recorded run's own."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from qualify.checks.rolerun import RoleRun
from qualify.core.errors import RunStoreError

ARCHIVE = (
    Path(__file__).resolve().parents[2] / "examples/llama-cpp-cuda/recorded/20261204-171520-cuda135.tar.xz"
)


@pytest.fixture(scope="module")
def measurements(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    where = tmp_path_factory.mktemp("measurements")
    with tarfile.open(ARCHIVE) as tar:
        members = [m for m in tar.getmembers() if m.name.endswith("/measurement.json")]
        tar.extractall(where, members=members, filter="data")
    return [where / m.name for m in members]


def test_every_recorded_measurement_gives_its_run_whole(measurements: list[Path]) -> None:
    ran = 0
    for path in measurements:
        document = json.loads(path.read_text())
        run = RoleRun.of(document, path)
        mine = {k: v for k, v in document.items() if k in RoleRun.model_fields}
        assert run.to_json() == {"version": 1, **mine}, path
        assert run.ok is bool(document.get("ok"))
        if run.command is not None:
            ran += 1
            assert run.command.returncode == document["command"]["returncode"]
            assert run.output_tail == document["output_tail"]
    assert ran >= 10 and len(measurements) > ran  # commands, and kinds that ran none of qualify's


def test_a_run_field_that_does_not_hold_names_the_file_and_key(measurements: list[Path]) -> None:
    path = next(p for p in measurements if '"command"' in p.read_text())
    document = json.loads(path.read_text())
    with pytest.raises(RunStoreError, match=r"measurement.json: ok is a string, not true or false"):
        RoleRun.of({**document, "ok": "yes"}, path)
    with pytest.raises(RunStoreError, match=r"measurement.json: command.timed_out is missing"):
        RoleRun.of(
            {**document, "command": {k: v for k, v in document["command"].items() if k != "timed_out"}}, path
        )
    with pytest.raises(
        RunStoreError, match=r"measurement.json: error.mesage: not a field this qualify knows"
    ):
        RoleRun.of({**document, "error": {"message": "lost", "mesage": "lost"}}, path)
