"""A verdict is derived from the run folder as it is now, never read back and trusted.

Each test starts from a real QUALIFIED run (six stages of real commands, the CLI in process or
as a real process), then does what an operator or a fault does to it: a rerun made to fail and
stopped by SIGTERM or SIGKILL, a corrupt stage.json or result.json, a result edited to another
verdict, a set stopped while its members were being made, a killed run rejudged. Whatever is
shown, rendered, merged or exited with must follow from the stages on disk.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PY, Project, qualify_proc
from typer.testing import CliRunner

from qualify.cli import app

runner = CliRunner()
STAGES = ("build", "compile", "numerics", "serving", "soak", "bench", "distribution")

#: A check that exits with the code its stage file gives, for the candidate only, and waits
#: first while a file `slow-<stage>` exists beside it (so a test can stop it mid-stage without
#: changing the stage file: the plan, and so the inputs, stay as they were).
CHECK = """\
import os, sys, time
stage, role, code = sys.argv[1], sys.argv[2], int(sys.argv[3])
here = os.path.dirname(os.path.abspath(__file__))
marker = os.path.join(here, "slow-" + stage)
if os.path.exists(marker):
    open(os.path.join(here, "started-" + stage), "w").write(str(os.getpid()))
    while os.path.exists(marker):
        time.sleep(0.05)
sys.exit(code if role == "candidate" else 0)
"""

CONFIG = """
[arms.pinned]
installable = ".#default"

[arms.cand]
installable = ".#cand"

[arms.cand2]
installable = ".#cand2"
"""


def cli(project: Project, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, [*args, "--project", str(project.root)], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def set_stage(project: Project, name: str, code: int) -> None:
    index = STAGES.index(name) + 1
    project.stage(
        f"{index}0-{name}.toml",
        f'name = "{name}"\n[[check]]\nkind = "command"\nname = "{name}-check"\n'
        f"run = '''{PY} {project.root / 'check.py'} {name} {{role}} {code}'''\n",
    )


def six(project: Project) -> None:
    project.script("check.py", CHECK)
    for name in STAGES:
        set_stage(project, name, 0)


def shown(project: Project, run: Path) -> str:
    """The verdict `show --json` gives (what the report, show and merge render)."""
    code, out = cli(project, "show", run.name, "--json")
    assert code == 0, out
    return str(json.loads(out[out.index("{") :])["verdict"])


def listed(project: Project, run: Path) -> str | None:
    code, out = cli(project, "runs", "--json")
    assert code == 0, out
    data = json.loads(out[out.index("[") :] if out.lstrip().startswith("[") else out[out.index("{") :])
    entries = data if isinstance(data, list) else data.get("runs", [])
    return next(e.get("verdict") for e in entries if e["run_id"] == run.name)


def qualified_run(project: Callable[..., Project]) -> tuple[Project, Path]:
    p = project(CONFIG)
    six(p)
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 0, out
    (run,) = p.run_dirs()
    assert shown(p, run) == "QUALIFIED"
    return p, run


def stop_a_failing_rerun(p: Project, run: Path, stage: str, sig: signal.Signals) -> subprocess.Popen[str]:
    """`run --only STAGE --force` of a stage now made to fail, stopped by `sig` mid-stage (its
    stage file changed: a rerun under a plan other than the run's, so --allow-dirty)."""
    set_stage(p, stage, 1)
    (p.root / f"slow-{stage}").write_text("")
    rerun = ["run", "--run", run.name, "--only", stage, "--force", "--allow-dirty"]
    proc = subprocess.Popen(
        [PY, "-m", "qualify", *rerun, "--project", str(p.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    started = p.root / f"started-{stage}"
    deadline = time.monotonic() + 120
    while not started.exists():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "the rerun never started its check"
        time.sleep(0.05)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    (p.root / f"slow-{stage}").unlink()
    started.unlink()
    return proc


@pytest.mark.slow
def test_a_rerun_stopped_by_sigterm_leaves_no_qualified_verdict(project: Callable[..., Project]) -> None:
    p, run = qualified_run(project)
    proc = stop_a_failing_rerun(p, run, "numerics", signal.SIGTERM)
    assert proc.returncode == 130
    saved = json.loads((run / "run.json").read_text())
    assert saved["status"] == "interrupted"
    assert saved["verdict"] != "QUALIFIED" and saved["exit_code"] != 0
    assert shown(p, run) == "INCOMPLETE"
    assert listed(p, run) == "INCOMPLETE"
    report = qualify_proc("report", run.name, "--project", str(p.root))
    assert report.returncode == 0, report.stdout + report.stderr
    assert json.loads((run / "report.json").read_text())["verdict"] == "INCOMPLETE"
    assert "QUALIFIED**" not in (run / "summary.md").read_text().replace("NOT QUALIFIED**", "")


def test_a_rerun_killed_outright_is_not_qualified_anywhere(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """SIGKILL leaves run.json saying QUALIFIED from the earlier attempt (nothing could update
    it); every reader derives the verdict instead, and merge does not make a QUALIFIED fleet."""
    p, run = qualified_run(project)
    stop_a_failing_rerun(p, run, "numerics", signal.SIGKILL)
    saved = json.loads((run / "run.json").read_text())
    assert saved["verdict"] == "QUALIFIED" and saved["status"] == "running"  # the stale claim
    assert shown(p, run) == "INCOMPLETE"
    assert listed(p, run) == "INCOMPLETE"
    out = tmp_path / "fleet"
    merged = runner.invoke(app, ["merge", str(run), "--out", str(out)])
    assert merged.exit_code == 3, merged.output
    assert json.loads((out / "run.json").read_text())["verdict"] == "INCOMPLETE"


def test_a_corrupt_stage_json_makes_the_run_incomplete(project: Callable[..., Project]) -> None:
    p, run = qualified_run(project)
    (run / "30-numerics" / "stage.json").write_text('{"schema_version": 1, "status": "comp')
    assert shown(p, run) == "INCOMPLETE"


def test_a_corrupt_result_json_is_not_kept_on_resume(project: Callable[..., Project]) -> None:
    p, run = qualified_run(project)
    result = run / "40-serving" / "serving-check" / "result.json"
    result.write_text(result.read_text()[:40])
    assert shown(p, run) == "INCOMPLETE"
    code, out = cli(p, "run", "--run", run.name)
    assert code == 0, out
    assert "serving: PASS kept" not in out.replace("\n", " ")
    assert json.loads((run / "40-serving" / "stage.json").read_text())["attempt"] == 2
    assert shown(p, run) == "QUALIFIED"


def test_a_result_edited_to_pass_is_not_believed(project: Callable[..., Project]) -> None:
    """A stage that failed, whose result.json is then edited to PASS: the two records disagree,
    and neither is counted."""
    p = project(CONFIG)
    six(p)
    set_stage(p, "bench", 1)
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 1, out
    (run,) = p.run_dirs()
    result = run / "60-bench" / "bench-check" / "result.json"
    result.write_text(result.read_text().replace('"verdict": "FAIL"', '"verdict": "PASS"'))
    assert json.loads(result.read_text())["verdict"] == "PASS"
    assert shown(p, run) == "INCOMPLETE"  # stage.json still says FAIL: UNREADABLE, not PASS
    code, out = cli(p, "show", run.name)
    assert "bench UNREADABLE" in out, out


@pytest.mark.slow
def test_a_set_stopped_while_being_made_can_be_shown_and_resumed(project: Callable[..., Project]) -> None:
    """What a kill between the set's run.json and its members' folders leaves (a member's
    folder missing) is shown, and resumed into a complete set."""
    p = project(CONFIG)
    six(p)
    code, out = cli(p, "run", "--candidate", "cand", "--candidate", "cand2")
    assert code == 0, out
    (run,) = p.run_dirs()
    shutil.rmtree(run / "cand2")
    code, out = cli(p, "show", run.name)
    assert code == 0, out
    assert "INCOMPLETE" in out and "QUALIFIED  (" not in out.replace("NOT QUALIFIED", "")
    assert shown(p, run) == "INCOMPLETE"
    code, out = cli(p, "run", "--run", run.name)
    assert code == 0, out
    assert (run / "cand2" / "run.json").is_file()
    assert shown(p, run) == "QUALIFIED"


@pytest.mark.slow
def test_a_set_member_rerun_stopped_leaves_the_set_not_qualified(project: Callable[..., Project]) -> None:
    p = project(CONFIG)
    six(p)
    code, out = cli(p, "run", "--candidate", "cand", "--candidate", "cand2")
    assert code == 0, out
    (run,) = p.run_dirs()
    stop_a_failing_rerun(p, run, "soak", signal.SIGKILL)
    assert shown(p, run) == "INCOMPLETE"
    code, out = cli(p, "show", run.name, "--json")
    members = json.loads(out[out.index("{") :])["columns"]
    assert all(c["verdict"] != "QUALIFIED" for c in members), members


def test_rejudge_of_a_killed_run_calls_it_stopped_not_running(project: Callable[..., Project]) -> None:
    p, run = qualified_run(project)
    saved = json.loads((run / "run.json").read_text())
    saved["status"] = "running"  # what SIGKILL leaves: no process holds the lock
    (run / "run.json").write_text(json.dumps(saved))
    code, out = cli(p, "report", run.name, "--rejudge")
    assert "is running" not in out, out
    assert code == 0, out
    assert shown(p, run) == "INCOMPLETE"  # its last attempt died: not QUALIFIED


# --- the property: QUALIFIED is shown only when a fresh run of the same plan would give it ---

from hypothesis import HealthCheck, Phase, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

#: A resume or a rerun with --allow-dirty (True) or without (False).
STEP = st.one_of(
    st.tuples(st.just("flag"), st.sampled_from(STAGES), st.sampled_from((0, 1))),
    st.tuples(st.just("resume"), st.booleans()),
    st.tuples(st.just("rerun"), st.sampled_from(STAGES), st.booleans()),
    st.tuples(st.just("kill"), st.sampled_from(STAGES)),
    st.tuples(
        st.just("corrupt"), st.sampled_from(STAGES), st.sampled_from(("stage", "result", "verdict", "forged"))
    ),
)


def corrupt(run: Path, stage: str, how: str) -> bool:
    """Damage one stage's records; whether anything changed. `forged` rewrites both records
    from FAIL to PASS, consistently, as a command of the run that could write them would."""
    folder = run / f"{STAGES.index(stage) + 1}0-{stage}"
    stage_json, result_json = folder / "stage.json", folder / f"{stage}-check" / "result.json"
    if how == "forged":
        changed = False
        for record in (stage_json, result_json):
            if record.is_file() and '"FAIL"' in (text := record.read_text()):
                record.write_text(text.replace('"FAIL"', '"PASS"'))
                changed = True
        return changed
    if how == "stage" and stage_json.is_file():
        stage_json.write_text(stage_json.read_text()[:25])
    elif how == "result" and result_json.is_file():
        result_json.write_text("")
    elif how == "verdict" and result_json.is_file():
        data = json.loads(result_json.read_text())
        data["verdict"] = "FAIL" if data.get("verdict") == "PASS" else "PASS"
        result_json.write_text(json.dumps(data))
    return True


@pytest.mark.slow
@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    # Each step is a real qualify run (seconds): a failing sequence is reported as found.
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(STEP, min_size=1, max_size=4))
# A failed stage whose records are then rewritten to PASS consistently (no disagreement left
# between them for the readers to see): only the seal tells.
@example(steps=[("flag", "bench", 1), ("rerun", "bench", True), ("corrupt", "bench", "forged")])
# A stage file changed since the run was made: a rerun without --allow-dirty is refused.
@example(steps=[("flag", "bench", 1), ("rerun", "bench", False), ("resume", False)])
def test_qualified_only_when_a_fresh_run_would_qualify(
    steps: list[tuple[object, ...]], tmp_path_factory: object
) -> None:
    """Any sequence of run / rerun / kill / corrupt-one-file / forge a stage's records consistently
    / resume (and edits of the plan) on a six-stage project: whenever `show` (and `runs`) says QUALIFIED, every stage's check passes
    under the plan the run records, every stage was measured with that plan, and nothing on
    disk was left broken or half-written since it last ran. A resume or a rerun is refused,
    changing nothing, while the plan differs from the one the run was made with, unless
    --allow-dirty."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="derived-", dir=str(tmp_path_factory.getbasetemp())))  # type: ignore[attr-defined]
    (root / "qualify.toml").write_text('plan = "stages"\n' + CONFIG)
    (root / "stages").mkdir()
    p = Project(root)
    six(p)
    codes = dict.fromkeys(STAGES, 0)  # each stage file's exit code now
    made_with = dict(codes)  # the plan's files as the run was made with them
    planned = dict(codes)  # the plan run.json records (refreshed by every `qualify run`)
    ran_with = dict(codes)  # the plan each stage's saved result was measured with
    broken: set[str] = set()  # stages corrupted or cut short since they last ran
    dead = False  # the last attempt was killed
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 0, out
    (run,) = p.run_dirs()
    for step in steps:
        kind, stage = step[0], str(step[1]) if len(step) > 1 else ""
        if kind == "flag":
            codes[stage] = int(step[2])  # type: ignore[call-overload]
            set_stage(p, stage, codes[stage])
        elif kind in ("resume", "rerun") and not step[-1] and codes != made_with:
            only = ["--only", stage, "--force"] if kind == "rerun" else []
            code, out = cli(p, "run", "--run", run.name, *only)
            assert code == 4 and "the working tree's plan differs" in out, (steps, out)
        elif kind == "resume":
            cli(p, "run", "--run", run.name, *(["--allow-dirty"] if step[-1] else []))
            planned = dict(codes)
            ran_with, broken, dead = dict(planned), set(), False
        elif kind == "rerun":
            cli(
                p,
                "run",
                "--run",
                run.name,
                "--only",
                stage,
                "--force",
                *(["--allow-dirty"] if step[-1] else []),
            )
            planned = dict(codes)
            ran_with[stage] = planned[stage]
            broken.discard(stage)
            dead = False
        elif kind == "kill":
            stop_a_failing_rerun(p, run, stage, signal.SIGKILL)
            codes[stage] = 1  # the rerun's stage file fails from now on
            planned = dict(codes)
            broken.add(stage)
            dead = True
        elif corrupt(run, stage, str(step[2])):
            broken.add(stage)
        verdict = shown(p, run)
        assert listed(p, run) == verdict
        if verdict == "QUALIFIED":
            assert all(c == 0 for c in planned.values()), (steps, planned)
            assert ran_with == planned and not broken and not dead, (steps, ran_with, broken, dead)


def test_a_stage_folder_outside_the_run_is_refused(project: Callable[..., Project]) -> None:
    """A run.json whose plan names a stage folder `../..` (edited, or from another host): its
    stages are never read through it; show names the file and the key (exit 2)."""
    p, run = qualified_run(project)
    saved = json.loads((run / "run.json").read_text())
    saved["plan"]["stages"][0]["folder"] = "../../elsewhere"
    (run / "run.json").write_text(json.dumps(saved))
    code, out = cli(p, "show", run.name)
    said = " ".join(out.split())
    assert code == 2, out
    assert "run.json" in said and "plan.stages[0] folder '../../elsewhere'" in said


def test_the_recorded_runs_load_as_records(tmp_path: Path) -> None:
    """Every run folder this repository keeps (the examples' recorded runs, as folders or as
    archives NAME.tar.xz) reads as a typed record: its roles, its plan's stages and, for a set,
    its members."""
    from recorded_runs import unpack

    from qualify.core.runstore import RunDir
    from qualify.records.run import RunRecord

    repo = Path(__file__).resolve().parents[2]
    found = [p.parent for p in (repo / "examples").glob("*/recorded/**/run.json")]
    archives = sorted((repo / "examples").glob("*/recorded/*.tar.xz"))
    found += [unpack(a, tmp_path / str(n)) for n, a in enumerate(archives)]
    assert len(archives) >= 3, archives  # the CUDA example's quick run and its two run sets
    for folder in found:
        record = RunRecord.load(RunDir(folder))
        assert record.stages and all(s.folder for s in record.stages), folder
        assert record.is_set or record.candidate_arm, folder


def test_an_undecided_stage_is_never_said_to_have_passed(project: Callable[..., Project]) -> None:
    """A set whose candidate's bench decided nothing, counted as WARN by the plan
    (`inconclusive = "warn"`): QUALIFIED, and its reason names the undecided stage instead of
    saying only that every candidate qualified; a positive control with such a stage is not
    said to have passed every stage."""
    from conftest import command_stage

    from qualify.core.verdicts import Verdict
    from qualify.pipeline.members import behaviour
    from qualify.records.run import Member

    emit = f"{PY} {Path(__file__).resolve().parent.parent / 'helpers' / 'emit_metrics.py'}"
    config = CONFIG.replace(
        'installable = ".#cand"\n', 'installable = ".#cand"\nvars = { samples = "speed:higher:90,96,99" }\n'
    )
    config = config.replace(
        'installable = ".#default"\n',
        'installable = ".#default"\nvars = { samples = "speed:higher:99,100,101" }\n',
        1,
    )
    config = config.replace(
        'installable = ".#cand2"\n',
        'installable = ".#cand2"\nvars = { samples = "speed:higher:99,100,101" }\n',
    )
    p = project(config)
    six(p)
    p.stage(
        "60-bench.toml",
        command_stage(
            "bench",
            f"{emit} {{out_file}} {{samples}}",
            inconclusive="warn",
            metrics="true",
            limits="{ speed_margin = 0.05 }",
        ),
    )
    code, out = cli(p, "run", "--candidate", "cand", "--candidate", "cand2")
    assert code == 0, out
    (run,) = p.run_dirs()
    saved = json.loads((run / "run.json").read_text())
    assert saved["member_results"]["cand"]["stages"]["bench"] == "WARN"
    assert saved["verdict"] == "QUALIFIED"
    assert "decided nothing" in saved["verdict_reason"] and "cand bench" in saved["verdict_reason"]
    aa = Member("positive-pinned", "pinned", "positive")
    said = behaviour(aa, {"compile": Verdict.PASS, "bench": Verdict.WARN}, undecided=("bench",))
    assert said.behaved is True and "every stage" not in said.why and "bench decided nothing" in said.why
