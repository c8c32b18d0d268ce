"""The search over written series (`scripted_series`): flips found exactly and in few probes,
skipped and undecided steps stepped around or reported as a range, the ends verified first,
series that flip more than once."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from scripted_series import parse, run, search_in_memory

from qualify.bisect.answers import summary
from qualify.bisect.drive import drive
from qualify.bisect.outcomes import Measured
from qualify.bisect.search import bisect_next, nearest_first
from qualify.bisect.state import BisectState, Step
from qualify.core.errors import ExitCode
from qualify.records.bisect import Finding, Mode, Outcome

G, B, S, U = Outcome.GOOD, Outcome.BAD, Outcome.SKIP, Outcome.UNDECIDED


def flip_at(length: int, first_bad: int, **words: str) -> str:
    """A series good below `first_bad` and bad from it; `words` (`s3="S"`) replace steps."""
    steps = ["G" if i < first_bad else "B" for i in range(length)]
    for key, word in words.items():
        steps[int(key[1:])] = word
    return " ".join(steps)


@pytest.mark.parametrize("length", range(2, 13))
def test_a_flip_at_every_position_is_found_in_few_probes(tmp_path: Path, length: int) -> None:
    for first_bad in range(1, length):
        folder = tmp_path / str(first_bad)
        folder.mkdir()
        answer, probe = run(folder, flip_at(length, first_bad))
        assert answer.finding is Finding.FOUND
        assert (answer.good, answer.bad) == (first_bad - 1, first_bad)
        assert answer.monotone and answer.exit_code == ExitCode.QUALIFIED == 0
        # Ends length - 1 steps apart: halving takes at most ceil(log2(length - 1)) probes.
        assert len(probe.calls) <= math.ceil(math.log2(length - 1)) + 2, probe.calls
        assert probe.calls[:2] == [0, length - 1], "the ends are verified first"
        assert max(probe.counts().values()) == 1, "no step is probed twice"


@pytest.mark.parametrize(
    ("skipped", "good", "bad"),
    [({6}, 5, 7), ({5}, 4, 6), ({5, 6}, 4, 7), ({4, 5, 6}, 3, 7), ({5, 6, 7, 8}, 4, 9)],
)
def test_skips_at_the_flip_leave_a_range_naming_exactly_them(
    tmp_path: Path, skipped: set[int], good: int, bad: int
) -> None:
    answer, probe = run(tmp_path, flip_at(12, 6, **{f"s{i}": "S" for i in skipped}))
    assert answer.finding is Finding.RANGE and answer.exit_code == ExitCode.INCOMPLETE == 3
    assert (answer.good, answer.bad) == (good, bad)
    assert set(answer.between) == skipped
    assert all(answer.outcomes[s] is S for s in answer.between)
    assert max(probe.counts().values()) == 1, "a skipped step is never probed again"


@pytest.mark.parametrize("skipped", [{1}, {2, 3}, {8, 9, 10}, {1, 9}, {4}, {7}, {2, 3, 4, 7, 8}])
def test_skips_away_from_the_flip_still_find_it(tmp_path: Path, skipped: set[int]) -> None:
    answer, probe = run(tmp_path, flip_at(12, 6, **{f"s{i}": "S" for i in skipped}))
    assert answer.finding is Finding.FOUND
    assert (answer.good, answer.bad) == (5, 6)
    assert max(probe.counts().values()) == 1


def test_a_skipped_midpoint_is_stepped_around_one_side_then_the_other() -> None:
    # Between 0 and 10 the midpoint is 5; with 5 and 6 skipped the next is 4, then 7.
    assert list(nearest_first(0, 10))[:5] == [5, 6, 4, 7, 3]
    answer, probed, _ = search_in_memory(parse(flip_at(11, 3, s5="S", s6="S")), 2)
    assert probed[:4] == [0, 10, 5, 6]
    assert probed[4] == 4
    assert answer.finding is Finding.FOUND and answer.bad == 3


@pytest.mark.parametrize("retries", [0, 1, 2, 3])
def test_an_undecided_step_at_the_flip_is_measured_again_then_left_a_range(
    tmp_path: Path, retries: int
) -> None:
    answer, probe = run(tmp_path, flip_at(9, 4, s4="U"), retries=retries)
    assert answer.finding is Finding.RANGE
    assert (answer.good, answer.bad, answer.between) == (3, 5, (4,))
    assert answer.outcomes[4] is U
    assert probe.counts()[4] == retries + 1
    assert "undecided" in summary(answer, [f"tc-{i}" for i in range(9)])


@pytest.mark.parametrize(("word", "good", "bad"), [("UUB", 3, 4), ("UG", 4, 5), ("UUUG", 4, 5)])
def test_an_undecided_step_that_decides_on_a_retry_is_found(
    tmp_path: Path, word: str, good: int, bad: int
) -> None:
    answer, probe = run(tmp_path, flip_at(9, 5, s4=word), retries=3)
    assert answer.finding is Finding.FOUND
    assert (answer.good, answer.bad) == (good, bad)
    assert probe.counts()[4] == len(word)
    # Retried at once: the attempts of step 4 follow each other.
    first = probe.calls.index(4)
    assert probe.calls[first : first + len(word)] == [4] * len(word)


def test_a_step_still_undecided_past_its_retries_is_never_guessed(tmp_path: Path) -> None:
    # Its third probe would be good, but two attempts (retries=1) are all it gets.
    answer, probe = run(tmp_path, flip_at(9, 5, s4="UUG"), retries=1)
    assert answer.finding is Finding.RANGE and answer.between == (4,)
    assert probe.counts()[4] == 2


@pytest.mark.parametrize("length", range(3, 11))
def test_every_series_flipping_more_than_once_ends_at_a_real_flip(length: int) -> None:
    for middle in itertools.product("GB", repeat=length - 2):
        truth = parse(" ".join(["G", *middle, "B"]))
        answer, probed, _ = search_in_memory(truth, 2)
        assert answer.finding is Finding.FOUND, middle
        assert truth[answer.good or 0] == [G] and truth[answer.bad or 0] == [B]
        assert answer.bad == (answer.good or 0) + 1
        assert len(probed) <= math.ceil(math.log2(length - 1)) + 2
        # Every probe lies between the last good and the first bad seen, so the search alone
        # never meets a good step above a bad one, and says so.
        assert answer.monotone


def test_outcomes_known_beforehand_that_flip_twice_are_reported(tmp_path: Path) -> None:
    """Steps 2 bad and 6 good, recorded from an earlier series, contradict one flip: the search
    answers a flip below the first bad step and says which steps contradict it."""
    truth = parse("G G B B B B G B B B")
    state = BisectState.create(
        tmp_path / "bisect.json", [f"tc-{i}" for i in range(10)], mode=Mode.BISECT, retries=2
    )
    state.record("tc-2", Measured(B))
    state.record("tc-6", Measured(G))
    probed: list[int] = []

    def probe(step: Step) -> Measured:
        probed.append(step.index)
        return Measured(truth[step.index][0])

    answer = drive(state, probe)
    assert answer.finding is Finding.FOUND and (answer.good, answer.bad) == (1, 2)
    assert not answer.monotone
    assert answer.contradictions == ((2, 6),)
    assert sorted(probed) == [0, 1, 9]
    assert "not one flip" in summary(answer, state.series)


def test_a_good_bad_end_stops_the_search_after_one_probe(tmp_path: Path) -> None:
    answer, probe = run(tmp_path, "G G G G G G")
    assert answer.finding is Finding.NO_FLIP and answer.end == 5
    assert answer.exit_code == ExitCode.NOT_QUALIFIED == 1
    assert probe.calls == [0, 5]


def test_a_bad_good_end_stops_the_search_before_anything_else(tmp_path: Path) -> None:
    answer, probe = run(tmp_path, "B B B G B B")
    assert answer.finding is Finding.BASELINE_BAD and answer.end == 0
    assert answer.exit_code == ExitCode.NOT_QUALIFIED
    assert probe.calls == [0]


@pytest.mark.parametrize(("text", "end", "probes"), [("S G B", 0, 1), ("G G S", 2, 2), ("G G UUU", 2, 4)])
def test_an_end_that_cannot_be_decided_is_said(tmp_path: Path, text: str, end: int, probes: int) -> None:
    answer, probe = run(tmp_path, text, retries=2)
    assert answer.finding is Finding.END_UNKNOWN and answer.end == end
    assert answer.exit_code == ExitCode.INCOMPLETE
    assert len(probe.calls) == probes


def test_an_end_known_from_the_run_is_not_probed_again() -> None:
    known: list[list[Outcome]] = [[], [], [], [], [B]]
    answer, probed, _ = search_in_memory(parse("G G B B B"), 2, known)
    assert answer.finding is Finding.FOUND and answer.bad == 2
    assert 4 not in probed


def test_a_step_probed_both_good_and_bad_is_undecided() -> None:
    """Recorded from elsewhere, a good and a bad probe of one step: the gate disagrees with
    itself there, so the step is unknown and the flip a range around it, never a guess."""
    answer = bisect_next([[G], [G, B], [B]], 2)
    assert not isinstance(answer, int)
    assert answer.finding is Finding.RANGE and answer.between == (1,)
    assert answer.outcomes[1] is U


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("G G G B B", "first bad step tc-3, last good tc-2"),
        ("G G S S B", "between tc-1 (good) and tc-4 (bad); no probe decided tc-2 (skip), tc-3 (skip)"),
        ("G G G G G", "no flip: the known-bad end tc-4 probed good"),
        ("B G G B B", "the known-good end tc-0 probed bad"),
        ("G G G B S", "cannot search: the end tc-4 was skip"),
    ],
)
def test_the_summary_names_the_steps_the_answer_found(text: str, said: str) -> None:
    answer, _, _ = search_in_memory(parse(text), 2)
    line = summary(answer, [f"tc-{i}" for i in range(5)])
    assert said in line
    assert "not one flip" not in line
