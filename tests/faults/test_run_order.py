"""Which run is the latest, and a run.json that cannot be listed, on real runs through the CLI.

"The latest run" (what `show`, `report` and `--only` take when no run is named) is the run made
last in the runs directory, by the sequence each run is given when its folder is made; never by
a saved time, since a host whose clock was ahead dates its runs in the future. Real projects
with one `command` stage; the skewed clock is written into the saved records (the machine's
clock cannot be moved by a test: qualify's own clock is set ahead in the process instead).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any, Self

import pytest
from conftest import Project, command_stage, qualify_proc
from typer.testing import CliRunner

from qualify.cli import app
from qualify.core import runlist, runstore


def one_stage(project: Callable[..., Project]) -> Project:
    p = project()
    p.stage("10-build.toml", command_stage("build", "true"))
    return p


def made(p: Project) -> Path:
    """A new run of the project, through the CLI; its folder."""
    before = set(p.run_dirs()) if p.runs.is_dir() else set()
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert done.returncode in (0, 3), done.stdout + done.stderr
    [new] = set(p.run_dirs()) - before
    return new


def made_at(p: Project, monkeypatch: pytest.MonkeyPatch, when: datetime | None) -> Path:
    """A new run made in this process while qualify's clock says `when` (None: the real time)."""

    class Clock(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> Self:
            moment = datetime.now(UTC) if when is None else when
            return cls.fromtimestamp(moment.timestamp(), tz)

    before = set(p.run_dirs()) if p.runs.is_dir() else set()
    with monkeypatch.context() as patched:
        patched.setattr(runstore, "datetime", Clock)  # the saved created_at
        patched.setattr(runlist, "datetime", Clock)  # the folder's name
        done = CliRunner().invoke(app, ["run", "--candidate", "cand", "--project", str(p.root)])
    assert done.exit_code in (0, 3), done.output
    [new] = set(p.run_dirs()) - before
    return new


def saved(run: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((run / "run.json").read_text())
    return document


def edit(run: Path, **changes: Any) -> None:
    document = json.loads((run / "run.json").read_text())
    for key, value in changes.items():
        if value is None:
            document.pop(key, None)
        else:
            document[key] = value
    (run / "run.json").write_text(json.dumps(document))


def renamed(run: Path, name: str) -> Path:
    """The run moved to the folder `name`, its record saying so (a run id is a clock too)."""
    target = run.with_name(name)
    run.rename(target)
    edit(target, run_id=name)
    return target


def listed(p: Project) -> list[dict[str, Any]]:
    done = qualify_proc("runs", "--json", "--project", str(p.root))
    assert done.returncode == 0, done.stdout + done.stderr
    entries: list[dict[str, Any]] = json.loads(done.stdout)
    return entries


def latest_shown(p: Project) -> str:
    done = qualify_proc("show", "--json", "--project", str(p.root))
    assert done.returncode in (0, 3), done.stdout + done.stderr
    return str(json.loads(done.stdout)["run_id"])


def test_the_latest_run_is_the_one_made_last_whatever_the_clocks_say(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run made while the clock was 974 years ahead stayed the latest for good: it had the
    largest created_at (and its name, a UTC stamp, says the future too). The skewed clock is
    a stand-in: qualify's clock in this process is set ahead, then back, then behind."""
    p = one_stage(project)
    ahead = made_at(p, monkeypatch, datetime(2999, 1, 1, tzinfo=UTC))
    second = made_at(p, monkeypatch, None)
    assert ahead.name.startswith("29990101-") and saved(ahead)["created_at"].startswith("2999-")
    assert latest_shown(p) == second.name
    assert [e["run_id"] for e in listed(p)] == [ahead.name, second.name]
    # Made after both, while the clock was behind: still the latest.
    third = made_at(p, monkeypatch, datetime(1999, 1, 1, tzinfo=UTC))
    assert latest_shown(p) == third.name
    assert [e["run_id"] for e in listed(p)] == [ahead.name, second.name, third.name]
    # `--only` reruns the latest run: the one made last.
    rerun = qualify_proc("run", "--only", "build", "--force", "--project", str(p.root))
    assert rerun.returncode in (0, 3), rerun.stdout + rerun.stderr
    assert (third / "10-build" / "attempts" / "1").is_dir()
    assert not (ahead / "10-build" / "attempts").exists()


@pytest.mark.slow
def test_runs_of_an_older_qualify_come_before_the_numbered_ones_by_name(
    project: Callable[..., Project],
) -> None:
    """A run made by a qualify that numbered no runs has no sequence: those runs are listed
    first, in the order of their names (their UTC stamps), the numbered ones after them."""
    p = one_stage(project)
    numbered = made(p)
    old_late = made(p)
    old_early = made(p)
    for run in (old_late, old_early):
        edit(run, sequence=None)
    old_late = renamed(old_late, "20991231-000000-cand")
    old_early = renamed(old_early, "20000101-000000-cand")
    edit(old_late, created_at="2099-12-31T00:00:00+00:00")
    assert [e["run_id"] for e in listed(p)] == [old_early.name, old_late.name, numbered.name]
    assert latest_shown(p) == numbered.name


@pytest.mark.parametrize(
    "created_at",
    [
        5,
        pytest.param(["2025-01-01T00:00:00+00:00"], marks=pytest.mark.slow),
        pytest.param({"at": 1}, marks=pytest.mark.slow),
    ],
)
def test_a_created_at_that_is_not_text_names_that_run_and_lists_the_others(
    project: Callable[..., Project], created_at: object
) -> None:
    """It ended in "internal error: TypeError(...)" and no run was listed at all."""
    p = one_stage(project)
    bad = made(p)
    good = made(p)
    edit(bad, created_at=created_at)
    done = qualify_proc("runs", "--project", str(p.root))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0, said
    assert "internal error" not in said
    assert good.name in said and bad.name in said, said
    entries = {e["run_id"]: e for e in listed(p)}
    assert entries[good.name]["status"] == "complete"
    broken = entries[bad.name]
    assert broken["status"] == "broken"
    assert str(bad / "run.json") in broken["error"] and "created_at" in broken["error"], broken
    assert broken["hint"], broken
    # The other run is still the latest to show.
    assert latest_shown(p) == good.name
