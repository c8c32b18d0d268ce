"""Member labels name folders: checked where a run set is made and wherever a run folder is read.

An arm of qualify.toml becomes a member's folder in a run set, and a run.json read back (a run
kept, or one from someone else's archive) names its members' folders by their labels. Each test
here is a real project with `command` stages run by the real CLI; the hostile run.json files are
a real set's, edited the way a forged archive would be.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Project, command_stage, qualify_proc

from qualify.core.errors import RunStoreError
from qualify.core.labels import MAX_LENGTH, SavedLabels, check_saved_labels, label_problem, name_problem


def set_project(project: Callable[..., Project], *arms: str) -> Project:
    """pinned, cand and the arms given (TOML quoted keys: any name an operator can write)."""
    extra = "".join(f'[arms."{arm}"]\ninstallable = ".#cand"\n' for arm in arms)
    p = project(
        textwrap.dedent(
            """
            inherit_env = []
            [arms.pinned]
            installable = ".#default"
            [arms.cand]
            installable = ".#cand"
            """
        )
        + extra
    )
    p.stage("10-build.toml", command_stage("build", "true"))
    return p


@pytest.mark.parametrize("arm", ["..", ".", "10-build", "-x", "logs", "attempts", "run.json"])
def test_an_arm_that_cannot_name_a_members_folder_is_refused_before_anything_runs(
    project: Callable[..., Project], arm: str
) -> None:
    """`..` once wrote the member's run.json and report into runs/ itself, `.` crashed and left
    the set running, `10-build` shared the stage's folder."""
    p = set_project(project, arm)
    done = qualify_proc("run", "--candidate", "cand", "--candidate", arm, "--project", str(p.root))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 4, said
    assert str(p.root / "qualify.toml") in said and f"arm {arm!r}" in said, said
    assert "internal error" not in said and "Traceback" not in said
    assert not p.runs.exists()  # nothing ran, nothing was made


def test_arms_that_would_share_a_folder_are_named(project: Callable[..., Project]) -> None:
    """`a b` and `a_b` are both the folder a_b; `Big` and `big` are one folder on a
    case-insensitive disk."""
    p = set_project(project, "a b", "a_b", "Big", "big")
    for pair in (("a b", "a_b"), ("Big", "big")):
        done = qualify_proc("run", "--candidate", pair[0], "--candidate", pair[1], "--project", str(p.root))
        said = " ".join((done.stdout + done.stderr).split())
        assert done.returncode == 4, said
        assert str(p.root / "qualify.toml") in said and all(repr(a) in said for a in pair), said
    assert not p.runs.exists()


def test_a_candidate_named_like_a_role_still_runs_as_its_own_member(project: Callable[..., Project]) -> None:
    p = set_project(project, "reference2")
    done = qualify_proc("run", "--candidate", "pinned", "--candidate", "reference2", "--project", str(p.root))
    assert done.returncode in (0, 3), done.stdout + done.stderr
    [run] = p.run_dirs()
    assert {m["label"] for m in json.loads((run / "run.json").read_text())["members"]} == {
        "candidate-pinned",
        "reference2",
    }


@pytest.fixture(scope="module")
def a_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run set of two candidates, made once; each test edits a copy."""
    root = tmp_path_factory.mktemp("set-project")
    (root / "qualify.toml").write_text(
        'plan = "stages"\ninherit_env = []\n'
        '[arms.pinned]\ninstallable = ".#default"\n[arms.cand]\ninstallable = ".#cand"\n'
        '[arms.cand2]\ninstallable = ".#cand"\n'
    )
    (root / "stages").mkdir()
    (root / "stages" / "10-build.toml").write_text(command_stage("build", "true"))
    done = qualify_proc("run", "--candidate", "cand", "--candidate", "cand2", "--project", str(root))
    assert done.returncode in (0, 3), done.stdout + done.stderr
    [run] = [d for d in (root / "runs").iterdir() if (d / "run.json").is_file()]
    return run


def forged(a_set: Path, where: Path, label: str) -> Path:
    """A copy of the set in `where/runs/` whose first member's label is `label`."""
    run = where / "runs" / a_set.name
    shutil.copytree(a_set, run, ignore=shutil.ignore_patterns("lock"))
    saved = json.loads((run / "run.json").read_text())
    saved["members"][0]["label"] = label
    (run / "run.json").write_text(json.dumps(saved))
    return run


HOSTILE = ["../../x", "/abs", "javascript:alert(1)"]


def _hostile(label: str, tmp_path: Path) -> str:
    """The label, with an absolute one pointed at a folder the test watches."""
    return str(tmp_path / "abs") if label == "/abs" else label


# `make check` takes the first label through every command, `make test` every label.
@pytest.mark.parametrize(
    "label", [HOSTILE[0], *(pytest.param(label, marks=pytest.mark.slow) for label in HOSTILE[1:])]
)
@pytest.mark.parametrize(
    "command", [("report",), ("report", "--rejudge"), ("show",), ("run", "--run")], ids=" ".join
)
def test_a_hostile_label_in_a_kept_run_is_refused_naming_the_file(
    a_set: Path, tmp_path: Path, label: str, command: tuple[str, ...]
) -> None:
    """report, report --rejudge, show and run --run read the members' labels back: a label that
    leads out of the run folder is refused (exit 2, the file named), and nothing is read or
    written through it."""
    label = _hostile(label, tmp_path)
    run = forged(a_set, tmp_path / "w", label)
    # Where `../../x` and the absolute label lead: a member's run there would be read, its report written.
    for outside in (run / label, tmp_path / "abs"):
        outside.resolve().mkdir(parents=True, exist_ok=True)
        shutil.copy(a_set / "cand" / "run.json", outside.resolve() / "run.json")
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if "runs" not in p.parts}
    done = qualify_proc(*command, str(run), "--project", str(a_set.parent.parent))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, said
    assert str(run / "run.json") in said and repr(label) in said and "internal error" not in said, said
    after = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if "runs" not in p.parts}
    assert after == before  # nothing outside the run folder was written


@pytest.mark.parametrize("label", HOSTILE)
def test_a_hostile_label_in_an_archive_is_refused_by_merge(a_set: Path, tmp_path: Path, label: str) -> None:
    """The label was copied into the fleet folder and followed: `../../x` read and wrote beside
    it, `javascript:` became a link on the fleet page."""
    label = _hostile(label, tmp_path)
    run = forged(a_set, tmp_path / "w", label)
    archive = tmp_path / "host.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(run, arcname=run.name)
    out = tmp_path / "fleet"
    done = qualify_proc("merge", str(archive), "--out", str(out))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, said
    assert f"{archive}: {run.name}/run.json" in said and repr(label) in said, said
    assert not out.exists() and not (tmp_path / "abs").exists()
    assert not list(tmp_path.glob(".fleet.*"))  # the staging folder is gone too


def test_a_hostile_label_in_a_members_own_run_json_is_refused(a_set: Path, tmp_path: Path) -> None:
    """A member's run.json names its label in the set: `run --run` of the member reran the set
    as that member."""
    run = tmp_path / "runs" / a_set.name
    shutil.copytree(a_set, run, ignore=shutil.ignore_patterns("lock"))
    member = run / "cand" / "run.json"
    saved = json.loads(member.read_text())
    saved["set"]["label"] = "../cand2"
    member.write_text(json.dumps(saved))
    done = qualify_proc("run", "--run", str(run / "cand"), "--project", str(a_set.parent.parent))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and str(member) in said and "'../cand2'" in said, said


@pytest.mark.slow
def test_a_hostile_host_key_in_a_fleet_is_refused(a_set: Path, tmp_path: Path) -> None:
    """`qualify report fleet/` reads its hosts from the fleet's run.json: a key is a folder."""
    out = tmp_path / "fleet"
    done = qualify_proc("merge", str(a_set), "--out", str(out))
    assert done.returncode in (0, 3), done.stdout + done.stderr
    saved = json.loads((out / "run.json").read_text())
    saved["hosts"][0]["key"] = "../../elsewhere"
    (out / "run.json").write_text(json.dumps(saved))
    done = qualify_proc("report", str(out), "--project", str(a_set.parent.parent))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and str(out / "run.json") in said and "'../../elsewhere'" in said, said


@pytest.mark.parametrize(
    ("label", "why"),
    [
        ("", "empty"),
        (".", "starts with '.'"),
        ("..", "starts with '.'"),
        (".hidden", "starts with '.'"),
        ("-rf", "starts with '-'"),
        ("a/b", "'/'"),
        ("a\\b", "'\\\\'"),
        ("javascript:x", "':'"),
        ("é", "'é'"),
        ("x" * (MAX_LENGTH + 1), "characters long"),
        ("10-build", "stage folder"),
        ("20_compile", "stage folder"),
        ("Pinned", "already holds 'pinned'"),
        ("pinned.2", "already holds"),
        ("gcroots", "already holds"),
        ("hosts", "already holds"),
    ],
)
def test_what_a_label_may_not_be(label: str, why: str) -> None:
    problem = label_problem(label)
    assert problem is not None and why in problem, problem


@pytest.mark.parametrize(
    "label", ["cand", "clang19", "positive-pinned", "negative-kvq4", "rocm_7.1", "x" * MAX_LENGTH]
)
def test_what_a_label_may_be(label: str) -> None:
    assert label_problem(label) is None


def test_a_fleet_host_key_is_a_safe_name_not_a_label() -> None:
    """A host may be called `logs` (hosts/logs is no clash); it may not be `..`."""
    assert name_problem("logs") is None and name_problem("..") is not None
    check_saved_labels({"kind": "fleet", "hosts": [{"key": "logs"}]}, "f/run.json")
    with pytest.raises(RunStoreError, match="two hosts"):
        check_saved_labels({"kind": "fleet", "hosts": [{"key": "a"}, {"key": "A"}]}, "f/run.json")


def test_a_malformed_members_list_is_named() -> None:
    for members in ("cand", [1], [{"label": 3}], [{"arm": "x"}]):
        with pytest.raises(RunStoreError, match=r"^f/run\.json: "):
            check_saved_labels({"kind": "set", "members": members}, "f/run.json")


def test_the_labels_a_run_json_names_folders_by_are_read_typed() -> None:
    members = [{"label": "cand", "arm": "a"}, {"label": "pos", "arm": "b"}]
    labels = check_saved_labels({"kind": "set", "members": members, "set": {"label": "x"}}, "f/run.json")
    assert labels == SavedLabels("set", members=("cand", "pos"), set_label="x")
    fleet = check_saved_labels({"kind": "fleet", "hosts": [{"key": "h1"}, {"key": "h2"}]}, "f/run.json")
    assert fleet.hosts == ("h1", "h2") and fleet.members == ()
    assert check_saved_labels({}, "f/run.json") == SavedLabels("run")  # a run of one, as qualify wrote it
    with pytest.raises(RunStoreError, match=r"^f/run\.json: kind is int, not a string"):
        check_saved_labels({"kind": 3}, "f/run.json")
    with pytest.raises(RunStoreError, match=r"^f/run\.json: 'hosts' is not a list of hosts"):
        check_saved_labels({"kind": "fleet", "hosts": {"key": "h1"}}, "f/run.json")
