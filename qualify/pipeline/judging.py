"""Calling a kind's judge, and the one rule every judgement obeys: no PASS without a judgement.

Both the stage runner and `--rejudge` judge through here, so the rule cannot be skipped by a
kind, a role set or a rerun: a judgement that records nothing judged (no limit evaluated, no
comparison made, no series tested) is FAIL "measured nothing", whatever the kind said.
"""

from __future__ import annotations

import traceback
from dataclasses import replace
from pathlib import Path

from qualify.checks.base import CheckKind, Finding, Judgement, SavedCheck
from qualify.core.errors import QualifyError
from qualify.core.redaction import redact_known
from qualify.core.runstore import write_atomic
from qualify.core.verdicts import Verdict

_OK = (Verdict.PASS, Verdict.WARN)


def judge_saved(kind: CheckKind, saved: SavedCheck, log_name: str = "judge-error.log") -> Judgement:
    """`kind.judge(saved)` with a crash turned into ERROR (the traceback in the check's logs/),
    its reason and findings redacted: they quote commands' output, and the console shows them."""
    return redacted(_judged(kind, saved, log_name))


def _judged(kind: CheckKind, saved: SavedCheck, log_name: str) -> Judgement:
    try:
        judgement = kind.judge(saved)
    except QualifyError as exc:
        # Redacted before its lines are joined: a secret split over two of them is found.
        return Judgement(Verdict.ERROR, redact_known(str(exc)).replace("\n", " — "))
    except Exception as exc:  # a judge bug must not lose the run: record it as ERROR
        log = harness_error_log(saved.folder, log_name)
        return Judgement(Verdict.ERROR, f"internal error in the {kind.name!r} judge: {exc!r}; see {log}")
    return no_pass_without_judgement(judgement)


def redacted(judgement: Judgement) -> Judgement:
    """`judgement` with the secrets in its reason and findings redacted as a child's output is."""
    findings = tuple(replace(f, message=redact_known(f.message)) for f in judgement.findings)
    return replace(judgement, reason=redact_known(judgement.reason), findings=findings)


def no_pass_without_judgement(judgement: Judgement) -> Judgement:
    if judgement.verdict not in _OK or judgement.judged:
        return judgement
    why = "measured nothing: no limit, comparison or series was judged"
    reason = f"{why} ({judgement.reason})" if judgement.reason else why
    return replace(
        judgement,
        verdict=Verdict.FAIL,
        reason=reason,
        findings=(*judgement.findings, Finding(Verdict.FAIL, why)),
    )


def crashed(message: str) -> Judgement:
    """The judgement of a measurement that crashed: ERROR, and it stays so when re-judged."""
    return Judgement(Verdict.ERROR, redact_known(f"the measurement crashed: {message}"))


def harness_error_log(folder: Path, name: str = "harness-error.log") -> Path:
    """The traceback of the exception being handled, kept in `<folder>/logs/<name>` (a bug in
    qualify or a kind never loses the run: the check is ERROR and the log says why)."""
    log = folder / "logs" / name
    write_atomic(log, traceback.format_exc().encode("utf-8"))  # never through a link
    return log
