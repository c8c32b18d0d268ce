"""What a finished bisect says: the one line for the console, `bisect.md` and the document
`bisect.json` holds once it answered (the saved state with the answer and a row per step)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qualify.bisect.answers import Answer, summary
from qualify.bisect.bars import bars, figure_text
from qualify.bisect.kernelchanges import LISTED, changed_kernels
from qualify.bisect.state import BisectState
from qualify.core import markdown as md
from qualify.records.bisect import Finding, SavedAnswer, StepEvidence, StepRow

#: How the console line and bisect.md name each finding.
TITLES: dict[Finding, str] = {
    Finding.FOUND: "FOUND",
    Finding.RANGE: "RANGE",
    Finding.NO_FLIP: "NO FLIP",
    Finding.BASELINE_BAD: "BASELINE BAD",
    Finding.END_UNKNOWN: "END UNKNOWN",
    Finding.SERIES: "SERIES",
}


def evidence_of(state: BisectState, step: int) -> StepEvidence | None:
    """The evidence of the step's last finished probe (the one that settled it), or None."""
    done = [p for p in state.probes if p.step == step and p.done]
    return done[-1].evidence if done else None


def _said(evidence: StepEvidence | None) -> str:
    """The gate's verdict and why, as the answer line gives them."""
    if evidence is None:
        return "? — no reason saved"
    return f"{evidence.verdict} — {evidence.reason or 'no reason saved'}"


def answer_line(answer: Answer, state: BisectState) -> str:
    """One line: the finding, the steps it names and, for a flip, what the gate said there."""
    names = state.series
    if answer.finding is Finding.FOUND and answer.bad is not None and answer.good is not None:
        said = evidence_of(state, answer.bad)
        line = (
            f"first bad: {names[answer.bad]} (step {answer.bad}), last good: {names[answer.good]} "
            f"(step {answer.good}): {'?' if said is None else said.gate} {_said(said)}"
        )
        if not answer.monotone:
            line += "; " + summary(answer, names).partition("; ")[2]
    else:
        line = summary(answer, names)
        if answer.finding is Finding.END_UNKNOWN and answer.end is not None:
            line += f" ({_said(evidence_of(state, answer.end))})"
    return f"{TITLES[answer.finding]}: {line}"


def step_rows(answer: Answer, state: BisectState) -> list[StepRow]:
    """A row per step of the series: its settled outcome and the evidence of its last probe."""
    rows = []
    for index, name in enumerate(state.series):
        said = evidence_of(state, index)
        settled = answer.outcomes[index]
        rows.append(
            StepRow(
                step=index,
                arm=name,
                outcome=settled.value if settled is not None else "not probed",
                probes=sum(1 for p in state.probes if p.step == index),
                verdict=None if said is None else said.verdict,
                reason=None if said is None else said.reason,
                run=None if said is None else said.run,
                # The gate's figure (a metric gate's medians), when the probe saved one.
                figure=None if said is None else said.figure,
            )
        )
    return rows


def kernel_changes(answer: Answer, state: BisectState) -> list[str] | None:
    """The kernels whose figures changed from the last good step to the first bad one, from the
    two steps' saved kernel comparisons; None without both (another kind of gate, no pair)."""
    if answer.good is None or answer.bad is None:
        return None
    good, bad = evidence_of(state, answer.good), evidence_of(state, answer.bad)
    if good is None or bad is None or not good.check_dir or not bad.check_dir:
        return None
    return changed_kernels(Path(good.check_dir), Path(bad.check_dir))


def answer_document(answer: Answer, state: BisectState) -> dict[str, Any]:
    """bisect.json once answered: the state as saved, with the answer and the steps' rows (a
    resume reads it as a state again)."""
    answered = state.saved().model_copy(
        update={
            "answer": SavedAnswer(
                finding=answer.finding,
                line=answer_line(answer, state),
                exit_code=int(answer.exit_code),
                good=answer.good,
                bad=answer.bad,
                between=list(answer.between),
                end=answer.end,
                monotone=answer.monotone,
                contradictions=[list(pair) for pair in answer.contradictions],
            ),
            "steps": step_rows(answer, state),
            "changed_kernels": kernel_changes(answer, state),
        }
    )
    return answered.to_json()


def markdown(answer: Answer, state: BisectState) -> str:
    """bisect.md: the answer, then a table of the steps with their outcomes, reasons and, for a
    gate with a figure, the figure and a bar per step (the flip marked on the first bad one).
    Every name, reason and kernel comes from outside (qualify.toml, the steps' runs, the
    binaries' symbols): each goes through `qualify.core.markdown`, so none renders as markup."""
    context = state.search_context()
    lines = [
        f"# qualify bisect: series {md.escape(context.series)}, gate {md.escape(context.gate)}",
        "",
        f"**{md.escape(answer_line(answer, state))}**",
        "",
    ]
    rows = step_rows(answer, state)
    figured = any(row.figure is not None for row in rows)
    extra = " figure | series |" if figured else ""
    lines.append("| step | arm | outcome | probes | gate verdict | reason | run |" + extra)
    lines.append("|---:|---|---|---:|---|---|---|" + ("---:|---|" if figured else ""))
    flip = answer.bad if answer.finding is Finding.FOUND else None
    for row, bar in zip(rows, bars([r.figure for r in rows]), strict=True):
        cells = [
            str(row.step),
            md.code(row.arm),
            md.escape(row.outcome),
            str(row.probes),
            md.escape(row.verdict or ""),
            md.escape(row.reason or ""),
            md.code(row.run or ""),
        ]
        if figured:
            cells += [md.escape(figure_text(row.figure)), md.code(bar)]
            if row.step == flip:
                cells[-1] += " ← flip"
        lines.append("| " + " | ".join(cells) + " |")
    changed = kernel_changes(answer, state)
    if changed is not None and answer.good is not None and answer.bad is not None:
        good, bad = md.escape(state.series[answer.good]), md.escape(state.series[answer.bad])
        lines += [
            "",
            f"## Kernels changed from {good} (last good) to {bad} (first bad)",
            "",
            *(f"- {md.escape(line)}" for line in changed[:LISTED]),
        ]
        if not changed:
            lines.append("No kernel's figures changed between the two steps.")
        elif len(changed) > LISTED:
            lines.append(f"- … and {len(changed) - LISTED} more")
    return "\n".join(lines) + "\n"
