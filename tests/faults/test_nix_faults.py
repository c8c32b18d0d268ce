"""Failing builds through real nix, on the fixture flake built with `builtins.derivation` (no
compiler, seconds): the candidate's failure is FAIL, the baseline's ERROR; the log and the
console say FAILED for the derivation, every JSON parses, nothing is left running."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import qualify_proc
from nixflakes import NIX_CONFIG, have_nix
from test_scenarios import settled

pytestmark = [pytest.mark.nix, pytest.mark.skipif(not have_nix(), reason="nix is not installed")]


def build(project: Path, *args: str) -> tuple[int, Path, str]:
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG}
    done = qualify_proc("run", *args, "--project", str(project), env=env)
    run = max((project / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    return done.returncode, run, done.stdout + done.stderr


@pytest.mark.parametrize(("args", "verdict", "code"), [
    (("--candidate", "broken"), "FAIL", 1),
    (("--candidate", "rocm10", "--pinned", "broken"), "ERROR", 3),
])  # fmt: skip
def test_a_failing_build_names_its_derivation(
    rocm_project: Path, args: tuple[str, ...], verdict: str, code: int
) -> None:
    returncode, run, said = build(rocm_project, *args)
    assert returncode == code, said
    result = json.loads((run / "10-build" / "arms" / "result.json").read_text())
    assert result["verdict"] == verdict, result["reason"]
    flat = " ".join(said.split())
    assert "FAILED engine-1.0: builder for" in flat and "failed with exit code 1" in flat
    role = "candidate" if verdict == "FAIL" else "pinned"
    built = json.loads((run / "10-build" / "arms" / role / "measurement.json").read_text())["built"]
    assert any(b["failed"] and "engine-1.0" in b["drv"] for b in built)
    settled(run)


def test_the_live_display_counts_derivations_from_the_dry_run_and_says_failed(
    rocm_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal: the candidate's derivations done out of those its dry run left it, and
    the failed one counted as failed."""
    import re
    from io import StringIO

    from rich.console import Console

    from qualify.console import ConsoleEvents
    from qualify.pipeline.runner import RunRequest, execute

    monkeypatch.setenv("NIX_CONFIG", NIX_CONFIG)
    out = StringIO()
    terminal = Console(file=out, force_terminal=True, width=200)
    outcome = execute(RunRequest(project=rocm_project, candidates=("broken",)), ConsoleEvents(terminal))
    assert outcome.exit_code == 1
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "\n", re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()))
    arms = outcome.run.path / "10-build" / "arms"
    planned = json.loads((arms / "plan.json").read_text())
    # What the dry run left the candidate, less what pinned, built first, built of it (a
    # derivation both arms share is built once: by pinned, unless an earlier test built it).
    by_pinned = {
        b["drv"]
        for b in json.loads((arms / "pinned" / "measurement.json").read_text())["built"]
        if b["seconds"] is not None and not b["failed"]
    }
    todo = len(set(planned["roles"]["candidate"]["will_build"]) - by_pinned)
    assert f"candidate 0/{todo} derivations" in shown
    assert re.search(rf"candidate \d+/{todo} derivations, 1 failed", shown)
    settled(outcome.run.path)
