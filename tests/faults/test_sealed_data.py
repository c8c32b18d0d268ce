"""Every file a verdict derives from is sealed, and the seal is authenticated: a later check, a
hand with write access to the run folder, or a folder copied into the runs directory cannot make
a run that did not qualify read as QUALIFIED to `show`, `report --rejudge` or `merge`.

Real runs of small projects through the CLI. The forgers are what a hostile check command or a
person editing the folder would do: rewrite an earlier check's metrics (what the `command` kind
judges), edit the records and then delete, empty or recompute seal.json, copy a qualified run in
with a higher `sequence`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import PY, Project, command_stage, qualify_proc
from privileged import (
    COMMAND_PY,
    EMIT,
    base_env,
    can_run_as_nobody,
    qualify,
    six,
    stage_file,
    start,
)

#: The second check of the numerics stage: every role's metrics of the first check rewritten to
#: pass (what its judge reads), and what became of each write said in ARGV[2].
REWRITE = """\
import json, pathlib, sys
done = []
for out in pathlib.Path(sys.argv[1]).glob("30-numerics/first/*/output"):
    try:
        out.write_text(json.dumps({"schema_version": 1, "metrics": [
            {"name": "speed", "unit": "u", "higher_is_better": True, "samples": [200.0, 201.0, 202.0]}]}))
        done.append(f"wrote {out}")
    except OSError as exc:
        done.append(f"refused: {exc}")
pathlib.Path(sys.argv[2]).write_text("\\n".join(done))
"""

NUMERICS = """\
name = "numerics"
[[check]]
kind = "command"
name = "first"
run = '''{py} {emit} {{out_file}} speed:higher:{{speed}}'''
metrics = true
limits = {{ min_speed = 100 }}
[[check]]
kind = "command"
name = "second"
run = '''{py} {rewrite} {{run_dir}} {said}/{{role}}'''
"""


@pytest.fixture
def reachable() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="qualify-sealed-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def verdict_of(output: str) -> str:
    return str(json.loads(output[output.index("{") :])["verdict"])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "user"),
    [("cgroup", None), ("", None), ("", "root")],
    ids=["cgroup, no mount", "no cgroup, no mount", "no cgroup, no mount, commands as root"],
)
def test_a_later_check_cannot_rewrite_an_earlier_checks_measurement(
    reachable: Path, tmp_path: Path, mode: str | None, user: str | None
) -> None:
    """numerics' first check FAILs the candidate on its metrics; its second check rewrites those
    metrics to pass. The run said NOT QUALIFIED, and `merge` of it, re-judging from the rewritten
    metrics, said QUALIFIED. Now the write is refused (the earlier check's folder is qualify's
    again, or read-only), and where commands may write it (as root, no mount namespace) the seal
    finds it: neither the run, nor its rejudgement, nor a merge of it qualifies."""
    if user is None and (why := can_run_as_nobody()):
        pytest.skip(why)
    said = reachable / "said"
    said.mkdir()
    said.chmod(0o777)
    root = six(reachable / "proj", compile_code=0)
    (root / "rewrite.py").write_text(REWRITE)
    stage_file(
        root, "numerics", NUMERICS.format(py=COMMAND_PY, emit=EMIT, rewrite=root / "rewrite.py", said=said)
    )
    env = base_env(mode, **({"QUALIFY_COMMAND_USER": user} if user else {}))
    proc = start(root, env, "--no-gate")  # the stages after numerics run: a merge could qualify it
    output, _ = proc.communicate(timeout=300)
    (run,) = [p for p in (root / "runs").iterdir() if (p / "run.json").is_file()]
    wrote = (said / "candidate").read_text()
    if user is None:
        assert "refused" in wrote and "wrote" not in wrote, wrote
        assert proc.returncode == 1, output
    else:
        assert "wrote" in wrote, wrote  # root with no mount namespace: only the seal is left
        assert proc.returncode == 2 and "tampered" in output and "30-numerics/first" in output, output
    shown = qualify("show", run.name, "--json", "--project", str(root), env=env)
    assert verdict_of(shown.stdout) != "QUALIFIED", shown.stdout
    copy = shutil.copytree(run, tmp_path / "rejudged" / run.name, ignore=shutil.ignore_patterns("lock"))
    again = qualify("report", str(copy), "--rejudge", "--json", "--project", str(root), env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert verdict_of(again.stdout) != "QUALIFIED", again.stdout
    merged = qualify("merge", str(run), "--out", str(tmp_path / "fleet"), "--json", env=env)
    assert verdict_of(merged.stdout) != "QUALIFIED", merged.stdout + merged.stderr


def forged_pass(run: Path) -> None:
    """The compile stage's FAIL made PASS in its stage.json and result.json, as they agree."""
    for path in [run / "20-compile" / "stage.json", *run.glob("20-compile/*/result.json")]:
        path.write_text(path.read_text().replace('"FAIL"', '"PASS"'))


def six_plain(project: Callable[..., Project], compile_code: int) -> Project:
    p = project("""
[arms.pinned]
installable = ".#default"
[arms.cand]
installable = ".#cand"
""")
    p.script("check.py", "import sys; sys.exit(int(sys.argv[2]) if sys.argv[1] == 'candidate' else 0)")
    for index, name in enumerate(("build", "compile", "numerics", "serving", "soak", "bench"), start=1):
        code = compile_code if name == "compile" else 0
        p.stage(f"{index}0-{name}.toml", command_stage(name, f"{PY} {p.root / 'check.py'} {{role}} {code}"))
    return p


def shown(p: Project, *run: str) -> dict[str, object]:
    done = qualify_proc("show", *run, "--json", "--project", str(p.root))
    return dict(json.loads(done.stdout[done.stdout.index("{") :]))


@pytest.mark.parametrize("how", ["deleted", "emptied", "cut short", "recomputed"])
def test_records_edited_then_the_seal_deleted_emptied_cut_or_recomputed_never_qualify(
    project: Callable[..., Project], tmp_path: Path, how: str
) -> None:
    """compile FAILed; its records are edited to PASS, then seal.json deleted, emptied, cut short
    or its digests computed again to match (anyone can compute a digest): `show` and `merge` said
    QUALIFIED. Now the run's seal is not authentic (or not there, for a run its runs directory
    made): the compile stage is UNREADABLE, "not sealed", and a merge does not qualify it."""
    p = six_plain(project, compile_code=1)
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert done.returncode == 1, done.stdout + done.stderr
    (run,) = p.run_dirs()
    forged_pass(run)
    seal = run / "seal.json"
    if how == "deleted":
        seal.unlink()
    elif how == "emptied":
        seal.write_text("")
    elif how == "cut short":
        seal.write_text(seal.read_text()[: len(seal.read_text()) // 2])
    else:
        document = json.loads(seal.read_text())
        for key in document["records"]:
            document["records"][key] = hashlib.sha256((run / key).read_bytes()).hexdigest()
        seal.write_text(json.dumps(document))
    view = shown(p, run.name)
    assert view["verdict"] != "QUALIFIED", view
    stages = {s["name"]: s for s in view["stages"]}  # type: ignore[attr-defined]
    assert stages["compile"]["outcome"] == "UNREADABLE", stages["compile"]
    assert "not sealed" in json.dumps(stages["compile"]), stages["compile"]
    # Merged from where it was made: not passed off as a run sealed on another host.
    merged = qualify_proc("merge", str(run), "--out", str(tmp_path / "fleet"), "--json")
    assert verdict_of(merged.stdout) != "QUALIFIED", merged.stdout + merged.stderr


def test_a_run_copied_in_with_a_higher_sequence_is_not_the_latest(project: Callable[..., Project]) -> None:
    """A qualified run's folder copied into the runs directory under a later name, its
    `sequence` raised above every other: `show` took it for the latest run (QUALIFIED) over the
    run made last (NOT QUALIFIED). Now only a run the runs directory's authenticated index lists
    can be the latest, and the copy, whose run.json is not as sealed, is not QUALIFIED either."""
    p = six_plain(project, compile_code=0)
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert done.returncode in (0, 3), done.stdout + done.stderr
    (good,) = p.run_dirs()
    good_verdict = shown(p, good.name)["verdict"]
    p.script("check.py", "import sys; sys.exit(1 if sys.argv[1] == 'candidate' else 0)")
    again = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert again.returncode == 1, again.stdout + again.stderr
    latest = next(r for r in p.run_dirs() if r != good)
    copy = shutil.copytree(good, p.runs / "29990101-000000-cand", ignore=shutil.ignore_patterns("lock"))
    document = json.loads((copy / "run.json").read_text())
    document.update(sequence=999, run_id=copy.name)
    (copy / "run.json").write_text(json.dumps(document))
    view = shown(p)
    assert view["run_id"] == latest.name and view["verdict"] == "NOT QUALIFIED", view
    assert shown(p, copy.name)["verdict"] != "QUALIFIED"
    assert good_verdict in ("QUALIFIED", "INCOMPLETE")


def test_the_seal_is_compared_after_each_check_only_where_a_command_could_write_the_records(
    reachable: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A comparison reads every sealed file: after each check, a stage's checks cost more the
    more came before them. Where no command can write a record (the run folder read-only to
    them, another user, a cgroup that ends what they leave), the seal is compared as the stage
    saves its progress (here: never), at its end and at the run's; commands run as qualify's own
    user are compared after every check too."""
    if why := can_run_as_nobody():
        pytest.skip(why)
    from typer.testing import CliRunner

    from qualify.cli import app
    from qualify.pipeline import stagerun
    from qualify.records import seal

    root = six(reachable / "proj", compile_code=0)
    for stage in root.joinpath("stages").iterdir():
        stage.unlink()
    stage_file(
        root,
        "numerics",
        'name = "numerics"\n'
        + "".join(f'[[check]]\nkind = "command"\nname = "c{n}"\nrun = "true"\n' for n in range(4)),
    )
    monkeypatch.setattr(stagerun, "PROGRESS_S", 3600.0)
    compared = 0
    check = seal.check

    def counted() -> None:
        nonlocal compared
        compared += 1
        check()

    monkeypatch.setattr(seal, "check", counted)
    for user, comparisons in ((None, 2), ("root", 4 + 2)):
        if user is None:
            monkeypatch.delenv("QUALIFY_COMMAND_USER", raising=False)
        else:
            monkeypatch.setenv("QUALIFY_COMMAND_USER", user)
        compared = 0
        before = set((root / "runs").glob("*/run.json"))
        result = CliRunner().invoke(app, ["run", "--candidate", "cand", "--project", str(root)])
        assert result.exit_code == 3, result.output  # INCOMPLETE: the other stages are not configured
        [made] = set((root / "runs").glob("*/run.json")) - before
        run = made.parent
        held = json.loads((run / "run.json").read_text())["containment"]
        if user is None and not (
            held["records"].startswith("read-only mount") and "cgroup" in held["processes"]
        ):
            pytest.skip(f"this host does not keep the records out of the commands' reach: {held}")
        assert compared == comparisons, (user, compared, held)
