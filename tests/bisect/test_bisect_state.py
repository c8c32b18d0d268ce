"""The saved state of a bisect: written whole or not at all, read back field by field, a wrong
field or an unknown step refused by name, a resume held to the search it continues."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from scripted_series import names, new_state, run

from qualify.bisect.drive import next_move
from qualify.bisect.outcomes import Measured
from qualify.bisect.report import answer_document
from qualify.bisect.resume import load, open_state, read_file
from qualify.bisect.state import BisectState
from qualify.cli.bisectlist import bisect_entry
from qualify.core.errors import RunStoreError, UsageError
from qualify.core.runstore import write_json
from qualify.records.bisect import Finding, Mode, Outcome

PY = sys.executable
HERE = Path(__file__).resolve().parent

#: Drives a search in a process of its own that kills itself (SIGKILL: no handler, no cleanup)
#: at the probe its argument names, as a power cut or the OOM killer would.
KILLED_AT_PROBE = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from scripted_series import Scripted, parse, names
from qualify.bisect.drive import drive
from qualify.bisect.resume import open_state
from qualify.records.bisect import Mode

truth = parse(sys.argv[2])
state = open_state(Path(sys.argv[1]), names(len(truth)), mode=Mode.BISECT, retries=2)
scripted = Scripted(truth, state)
kill_at = int(sys.argv[4])

def probe(step):
    if len(scripted.calls) + 1 == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    return scripted(step)

drive(state, probe)
"""

TEXT = "G G S G UG G G B B UUB B B"


@pytest.mark.parametrize("kill_at", [1, 2, 3, 5])
def test_a_process_killed_between_writes_leaves_the_state_before_it(tmp_path: Path, kill_at: int) -> None:
    (tmp_path / "whole").mkdir()
    reference, whole = run(tmp_path / "whole", TEXT)
    path = tmp_path / "bisect.json"
    done = subprocess.run([PY, "-c", KILLED_AT_PROBE, str(path), TEXT, str(HERE), str(kill_at)], check=False)
    assert done.returncode == -signal.SIGKILL
    state = load(path)
    assert len(state.probes) == kill_at
    assert all(p.outcome is not None for p in state.probes[:-1])
    assert state.probes[-1].outcome is None, "the probe it died in is saved as started"
    assert [p.step for p in state.probes] == whole.calls[:kill_at]
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == [], "a write finished before the kill leaves no temporary file"
    # And it resumes to the answer the search reaches uninterrupted.
    done = subprocess.run([PY, "-c", KILLED_AT_PROBE, str(path), TEXT, str(HERE), "0"], check=False)
    assert done.returncode == 0
    finished = [p.step for p in load(path).probes if p.outcome is not None]
    assert sorted(finished) == sorted(whole.calls)
    assert next_move(load(path)) == reference


#: Saves a state whose probes carry megabytes of evidence, over and over, until killed.
SAVING = """
import sys
from pathlib import Path
from qualify.bisect.outcomes import Measured
from qualify.records.bisect import Outcome
from qualify.bisect.resume import open_state
from qualify.records.bisect import Mode
from qualify.records.bisect import StepEvidence

state = open_state(Path(sys.argv[1]), ["a", "b", "c"], mode=Mode.SERIES, retries=10**9)
print("ready", flush=True)
while True:
    state.begin(1)
    said = StepEvidence(run="r", gate="g", verdict="INCONCLUSIVE", reason="x" * 3_000_000)
    state.finish(Measured(Outcome.UNDECIDED, said))
"""


def test_a_process_killed_while_saving_leaves_a_whole_state(tmp_path: Path) -> None:
    path = tmp_path / "bisect.json"
    for delay in (0.05, 0.17, 0.4):
        proc = subprocess.Popen([PY, "-c", SAVING, str(path)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        state = load(path)  # raises if the file was torn
        assert [p.attempt for p in state.probes] == list(range(1, len(state.probes) + 1))


def valid_document(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    run(tmp_path, "G G S B B", retries=1)
    path = tmp_path / "bisect.json"
    return path, json.loads(path.read_text())


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d.update(mode="bisekt"), "mode"),
        (lambda d: d.pop("mode"), "mode"),
        (lambda d: d.update(series="tc-0"), "series"),
        (lambda d: d.update(series=["tc-0"]), "series"),
        (lambda d: d["series"].__setitem__(2, 7), "series[2]"),
        (lambda d: d["series"].__setitem__(2, "tc-1"), "series[2]"),
        (lambda d: d.update(retries=-1), "retries"),
        (lambda d: d.update(retries=True), "retries"),
        (lambda d: d.update(context=[]), "context"),
        (lambda d: d.update(probes={}), "probes"),
        (lambda d: d.pop("probes"), "probes"),
        (lambda d: d["probes"].__setitem__(1, "tc-4"), "probes[1]"),
        (lambda d: d["probes"][1].update(step="tc-44"), "probes[1].step"),
        (lambda d: d["probes"][1].update(step=4), "probes[1].step"),
        (lambda d: d["probes"][1].update(attempt=2), "probes[1].attempt"),
        (lambda d: d["probes"][1].pop("attempt"), "probes[1].attempt"),
        (lambda d: d["probes"][2].update(outcome="fine"), "probes[2].outcome"),
        (lambda d: d["probes"][2].update(finished=None), "probes[2].finished"),
        (lambda d: d["probes"][2].update(outcome=None), "probes[2].finished"),
        (lambda d: d["probes"][0].pop("started"), "probes[0].started"),
        (lambda d: d["probes"][0].update(evidence="run 3"), "probes[0].evidence"),
        (lambda d: d["probes"][0]["evidence"].pop("verdict"), "probes[0].evidence.verdict"),
        (lambda d: d["probes"][0]["evidence"].update(log="x"), "probes[0].evidence.log"),
        (
            lambda d: d["probes"][0]["evidence"].update(figure={"candidate": "1"}),
            "probes[0].evidence.figure.MetricFigure.candidate",
        ),
        (lambda d: d.update(answer={"finding": "found"}), "answer.line"),
        (lambda d: d.update(steps=[{"step": 0}]), "steps[0].arm"),
        (lambda d: d.update(changed_kernels="none"), "changed_kernels"),
    ],
)
def test_a_wrong_field_is_named_with_the_file(tmp_path: Path, change: Any, named: str) -> None:
    path, document = valid_document(tmp_path)
    load(path)  # as written, it reads
    change(document)
    path.write_text(json.dumps(document))
    with pytest.raises(RunStoreError) as caught:
        load(path)
    assert str(path) in caught.value.message
    assert re.search(f"{re.escape(f'{path}: {named}')}[ :]", caught.value.message), caught.value.message
    assert caught.value.hint and "remove it" in caught.value.hint


def test_an_answered_state_reads_back_with_its_answer_and_rows(tmp_path: Path) -> None:
    answer, _ = run(tmp_path, "G G G B B", retries=1)
    path = tmp_path / "bisect.json"
    state = load(path)
    state.context = {"series": "tcs", "gate": "numerics"}
    write_json(path, answer_document(answer, state))
    saved = read_file(path)
    assert saved.answer is not None and saved.answer.finding is Finding.FOUND
    assert saved.steps is not None and [row.outcome for row in saved.steps] == [
        "good",
        "not probed",
        "good",
        "bad",
        "bad",
    ]
    assert load(path).known() == state.known(), "a resume reads the answered file as its state"


def test_a_newer_version_is_refused_and_an_older_layout_reads(tmp_path: Path) -> None:
    path, document = valid_document(tmp_path)
    path.write_text(json.dumps({**document, "version": 2}))
    with pytest.raises(RunStoreError, match="version 2; this qualify reads BisectFile up to version 1"):
        load(path)
    # Written before its evidence had a type: a probe without evidence saved an empty object, or
    # none; a state without context saved none either.
    document["probes"][0]["evidence"] = {}
    del document["probes"][1]["evidence"]
    del document["context"], document["version"]
    path.write_text(json.dumps(document))
    state = load(path)
    assert [p.evidence for p in state.probes[:2]] == [None, None] and state.context == {}
    assert state.probes[2].evidence is not None and state.probes[2].evidence.run == "tc-2-attempt-1"


def test_an_unknown_step_in_the_file_is_refused_with_the_close_name(tmp_path: Path) -> None:
    path, document = valid_document(tmp_path)
    document["probes"][1]["step"] = "tc-33"
    path.write_text(json.dumps(document))
    with pytest.raises(
        RunStoreError, match=r'probes\[1\]\.step: "tc-33" is no step of the series \(did you mean'
    ):
        load(path)


@pytest.mark.parametrize(
    ("text", "words"),
    [("", "missing"), ("{", "unreadable"), ("[]", "JSON object"), ('{"schema_version": 99}', "newer")],
)
def test_a_file_that_is_no_state_is_refused(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "bisect.json"
    if text:
        path.write_text(text)
    with pytest.raises(RunStoreError, match=words):
        load(path)


def test_an_unknown_step_name_is_refused_when_recording(tmp_path: Path) -> None:
    state = new_state(tmp_path, 4)
    with pytest.raises(UsageError, match=r'no step "tc3" in the series \(did you mean "tc-3"\?\)') as caught:
        state.record("tc3", Measured(Outcome.BAD))
    assert caught.value.hint == "the series is tc-0, tc-1, tc-2, tc-3"
    assert load(tmp_path / "bisect.json").probes == [], "nothing was saved for it"


def test_read_back_it_is_the_state_that_was_saved(tmp_path: Path) -> None:
    answer, _ = run(tmp_path, "G UG S G B B", retries=1)
    saved = json.loads((tmp_path / "bisect.json").read_text())
    again = load(tmp_path / "bisect.json")
    assert again.document() == {k: v for k, v in saved.items() if k != "schema_version"}
    assert [p.evidence.run for p in again.probes if p.evidence][:2] == ["tc-0-attempt-1", "tc-5-attempt-1"]
    assert answer.good is not None and answer.bad == answer.good + 1


@pytest.mark.parametrize(
    ("series", "mode", "context", "key"),
    [
        (["tc-0", "tc-1", "tc-2", "tc-3", "tc-x"], Mode.BISECT, {"gate": "numerics"}, "series"),
        (names(5), Mode.SERIES, {"gate": "numerics"}, "mode"),
        (names(5), Mode.BISECT, {"gate": "bench"}, "context"),
    ],
)
def test_a_resume_of_another_search_is_refused(
    tmp_path: Path, series: list[str], mode: Mode, context: dict[str, str], key: str
) -> None:
    path = tmp_path / "bisect.json"
    state = open_state(path, names(5), mode=Mode.BISECT, retries=2, context={"gate": "numerics"})
    state.record("tc-4", Measured(Outcome.BAD))
    with pytest.raises(UsageError, match=f"holds a bisect of another {key}"):
        open_state(path, series, mode=mode, retries=2, context=context)
    same = open_state(path, names(5), mode=Mode.BISECT, retries=3, context={"gate": "numerics"})
    assert same.known()[4] == [Outcome.BAD] and same.retries == 3


def test_a_new_state_never_writes_over_a_saved_one(tmp_path: Path) -> None:
    state = new_state(tmp_path, 3)
    state.record("tc-2", Measured(Outcome.BAD))
    with pytest.raises(UsageError, match="already holds a bisect"):
        BisectState.create(tmp_path / "bisect.json", names(3), mode=Mode.BISECT, retries=2)
    assert load(tmp_path / "bisect.json").known()[2] == [Outcome.BAD]


@pytest.mark.parametrize(
    ("series", "words"),
    [(["only"], "at least 2"), (["a", "b", "a"], "more than once in the series: a"), (["a", " "], "empty")],
)
def test_a_series_that_cannot_be_searched_is_bad_usage(tmp_path: Path, series: list[str], words: str) -> None:
    with pytest.raises(UsageError, match=words) as caught:
        BisectState.create(tmp_path / "bisect.json", series, mode=Mode.BISECT, retries=2)
    assert caught.value.exit_code == 4
    assert not (tmp_path / "bisect.json").exists()


def test_a_write_that_fails_leaves_memory_as_the_file(tmp_path: Path) -> None:
    """The state's folder replaced by a file: saving the start of a probe fails, and the probe
    is not kept in memory either, so the next probe of the step is still its first attempt."""
    folder = tmp_path / "bisect"
    folder.mkdir()
    state = new_state(folder, 4)
    state.record("tc-0", Measured(Outcome.GOOD))
    shutil.rmtree(folder)
    folder.write_text("in the way")
    with pytest.raises(RunStoreError, match="bisect.json"):
        state.begin(3)
    assert len(state.probes) == 1 and state.under_way is None
    folder.unlink()
    folder.mkdir()
    assert state.begin(3).attempt == 1
    state.finish(Measured(Outcome.BAD))
    assert [(p.step, p.attempt) for p in load(folder / "bisect.json").probes] == [(0, 1), (3, 1)]


def test_a_context_resumes_as_it_was_given(tmp_path: Path) -> None:
    context = {"gate": "numerics", "arms": ("pinned", "rocm10"), "limit": 0.01}
    open_state(tmp_path / "bisect.json", names(3), mode=Mode.BISECT, retries=2, context=context)
    resumed = open_state(tmp_path / "bisect.json", names(3), mode=Mode.BISECT, retries=2, context=context)
    assert resumed.context["arms"] == ["pinned", "rocm10"]


def test_a_listed_bisect_whose_state_does_not_read_is_broken_naming_file_and_key(tmp_path: Path) -> None:
    answer, _ = run(tmp_path, "G G G B B", retries=1)
    path = tmp_path / "bisect.json"
    state = load(path)
    state.context = {"series": "tcs", "gate": "numerics", "profile": "fast"}
    document = answer_document(answer, state)
    write_json(path, document)
    entry = bisect_entry(tmp_path)
    assert (entry["status"], entry["verdict"], entry["profile"]) == ("answered", "FOUND", "fast")
    assert entry["candidate"] == "bisect: tc-0 … tc-4 (5 steps)" and entry["probes"] == len(state.probes)
    document["answer"]["finding"] = "founded"
    write_json(path, document)
    broken = bisect_entry(tmp_path)
    assert broken["status"] == "broken" and broken["error"].startswith(
        f"{path}: answer.finding 'founded' is not one of 'found', "
    ), broken
    document["answer"]["finding"] = "found"
    document["context"]["profil"] = "fast"
    write_json(path, document)
    assert bisect_entry(tmp_path)["error"].startswith(f"{path}: context.profil: not a field")
