"""A bisect or series stopped at any probe resumes from its saved file: the same answer, and
nothing probed again but the probe that was stopped (`scripted_series` plays the probes)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from scripted_series import Scripted, names, parse, run

from qualify.bisect.drive import drive
from qualify.bisect.resume import load, open_state
from qualify.records.bisect import Mode

SERIES = [
    "G G G G G G G B B B B B B",  # one flip, nothing in the way
    "G G S G S UUG G S B UB B B",  # skips and undecided steps around a flip
    "G G G S S B B",  # a range
    "G B G B G G B B",  # flips more than once
    "G G G G G",  # no flip
    "G G G UUU B",  # an undecided step at the flip, a range in the end
]


def stop_and_resume(
    folder: Path, text: str, mode: Mode, stop_at: int
) -> tuple[object, list[int], Counter[int]]:
    """Drive until the `stop_at`-th probe is interrupted, then load the file and go on."""
    truth = parse(text)
    state = open_state(folder / "bisect.json", names(len(truth)), mode=mode, retries=2)
    first = Scripted(truth, state, interrupt_at=stop_at)
    with pytest.raises(KeyboardInterrupt):
        drive(state, first)
    resumed = load(folder / "bisect.json")
    stopped = resumed.probes[-1]
    assert stopped.outcome is None and stopped.finished is None, "the stopped probe is saved as started"
    assert stopped.step == first.calls[-1]
    assert len(resumed.probes) == stop_at
    again = open_state(folder / "bisect.json", names(len(truth)), mode=mode, retries=2)
    second = Scripted(truth, again)
    answer = drive(again, second)
    return answer, first.calls + second.calls, Counter(p.step for p in load(folder / "bisect.json").probes)


@pytest.mark.parametrize("mode", [Mode.BISECT, Mode.SERIES])
@pytest.mark.parametrize("text", SERIES)
def test_stopped_at_any_probe_it_resumes_to_the_same_answer(tmp_path: Path, text: str, mode: Mode) -> None:
    (tmp_path / "whole").mkdir()
    reference, whole = run(tmp_path / "whole", text, mode=mode)
    for stop_at in range(1, len(whole.calls) + 1):
        folder = tmp_path / f"stop-{stop_at}"
        folder.mkdir()
        answer, calls, saved = stop_and_resume(folder, text, mode, stop_at)
        assert answer == reference, f"stopped at probe {stop_at}"
        stopped = whole.calls[stop_at - 1]
        # Every probe made once more than the uninterrupted search made it: only the stopped one.
        assert Counter(calls) - whole.counts() == Counter({stopped: 1})
        assert whole.counts() - Counter(calls) == Counter()
        assert saved == whole.counts() + Counter({stopped: 1})
        finished = [p for p in load(folder / "bisect.json").probes if p.outcome is not None]
        assert len(finished) == len(whole.calls), "the stopped probe counts for nothing"


def test_series_mode_probes_every_step_once_in_order(tmp_path: Path) -> None:
    answer, probe = run(tmp_path, "G B B G S G B", mode=Mode.SERIES)
    assert probe.calls == list(range(7))
    assert list(answer.outcomes) == [o[0] for o in parse("G B B G S G B")]
    assert answer.finding.value == "series" and answer.exit_code == 0
    assert not answer.monotone and answer.contradictions == ((2, 3),)


def test_series_mode_measures_an_undecided_step_again_before_going_on(tmp_path: Path) -> None:
    _, probe = run(tmp_path, "G UUB UUU B", mode=Mode.SERIES, retries=2)
    assert probe.calls == [0, 1, 1, 1, 2, 2, 2, 3]
    saved = load(tmp_path / "bisect.json")
    assert [(p.step, p.attempt) for p in saved.probes][1:4] == [(1, 1), (1, 2), (1, 3)]
    assert [p.evidence.run for p in saved.probes if p.evidence][:2] == ["tc-0-attempt-1", "tc-1-attempt-1"]
