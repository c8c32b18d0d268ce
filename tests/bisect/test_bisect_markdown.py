"""bisect.md holds outside text: arm names from qualify.toml, the steps' reasons, kernels named by
the binaries' symbols. Each must render as its characters, never as Markdown or HTML."""

from __future__ import annotations

import re
from pathlib import Path

from qualify.bisect.answers import Answer
from qualify.bisect.report import markdown
from qualify.bisect.state import BisectState, ProbeRecord
from qualify.records.bisect import Finding, Mode, Outcome, StepEvidence


def test_names_and_reasons_render_inert(tmp_path: Path) -> None:
    series = ("good", "evil`|<img src=x onerror=alert(1)>")
    state = BisectState(
        tmp_path / "bisect.json", series, Mode.BISECT, 2, {"series": "# heading", "gate": "[x](y)"}
    )
    for step, outcome in ((0, Outcome.GOOD), (1, Outcome.BAD)):
        reason = "<script>alert(1)</script> | **bold**" if step else "fine"
        verdict = "FAIL" if step else "PASS"
        evidence = StepEvidence(run=f"/runs/{series[step]}", gate="[x](y)", verdict=verdict, reason=reason)
        state.probes.append(ProbeRecord(step, 1, "t", outcome, "t", evidence))
    answer = Answer(Finding.FOUND, (Outcome.GOOD, Outcome.BAD), good=0, bad=1)
    text = markdown(answer, state)
    # In a code span (the arm, the run's folder) nothing is markup; everywhere else no raw HTML.
    outside = re.sub(r"(`+).*?\1", "", text)
    assert "<img" not in outside and "<script>" not in text and "&lt;script&gt;" in text
    assert "&lt;img" in text  # the answer line names the arm as text
    assert "**bold**" not in text and "\\*\\*bold\\*\\*" in text
    assert "series \\# heading" in text and "\\[x\\](y)" in text
    # The table keeps its columns: every row has as many unescaped pipes as the header.
    rows = [line for line in text.splitlines() if line.startswith("|")]
    counts = {line.replace("\\|", "").count("|") for line in rows}
    assert len(counts) == 1, rows
