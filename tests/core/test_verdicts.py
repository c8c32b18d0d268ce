"""Stage and run verdicts combine exactly as docs/design.md says."""

from __future__ import annotations

from qualify.core.errors import ExitCode
from qualify.core.verdicts import RunVerdict, StageState, Verdict, exit_code_for, run_verdict, stage_verdict
from qualify.pipeline.plan import DEFAULT_ORDER

P, W, I, F, E, S = (
    Verdict.PASS,
    Verdict.WARN,
    Verdict.INCONCLUSIVE,
    Verdict.FAIL,
    Verdict.ERROR,
    Verdict.SKIPPED,
)


def test_worst_check_wins_and_fail_beats_error() -> None:
    assert stage_verdict([P, W]) is W
    assert stage_verdict([P, I, W]) is I
    assert stage_verdict([E, F, P]) is F
    assert stage_verdict([E, I]) is E


def test_skipped_counts_only_when_all_skipped() -> None:
    assert stage_verdict([S, P]) is P
    assert stage_verdict([S, S]) is S


def test_inconclusive_as_warn() -> None:
    assert stage_verdict([P, I], inconclusive_as_warn=True) is W
    assert stage_verdict([F, I], inconclusive_as_warn=True) is F


def all_stages(**overrides: Verdict | StageState) -> dict[str, Verdict | StageState]:
    stages: dict[str, Verdict | StageState] = dict.fromkeys(DEFAULT_ORDER, P)
    stages.update(overrides)
    return stages


def test_run_verdicts() -> None:
    assert run_verdict(all_stages(), DEFAULT_ORDER) is RunVerdict.QUALIFIED
    assert run_verdict(all_stages(soak=W), DEFAULT_ORDER) is RunVerdict.QUALIFIED
    assert run_verdict(all_stages(bench=I), DEFAULT_ORDER) is RunVerdict.NOT_QUALIFIED
    assert (
        run_verdict(all_stages(compile=F, bench=StageState.BLOCKED), DEFAULT_ORDER)
        is RunVerdict.NOT_QUALIFIED
    )
    assert run_verdict(all_stages(serving=E), DEFAULT_ORDER) is RunVerdict.INCOMPLETE
    assert run_verdict(all_stages(soak=S), DEFAULT_ORDER) is RunVerdict.INCOMPLETE
    assert run_verdict(all_stages(soak=StageState.NOT_CONFIGURED), DEFAULT_ORDER) is RunVerdict.INCOMPLETE
    partial = {"compile": P}
    assert run_verdict(partial, DEFAULT_ORDER) is RunVerdict.INCOMPLETE


def test_exit_codes() -> None:
    assert exit_code_for(RunVerdict.QUALIFIED) == ExitCode.QUALIFIED == 0
    assert exit_code_for(RunVerdict.NOT_QUALIFIED) == 1
    assert exit_code_for(RunVerdict.INCOMPLETE) == 3
