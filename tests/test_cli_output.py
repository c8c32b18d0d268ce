"""What the command line prints and how it ends, as a newcomer and a CI job meet it: `-V`, shell
completion, help without Python types, a reader that leaves the pipe early, `report --json`,
output off a terminal (no wrap at 80 columns, no padding, run ids whole), `qualify init`'s
.gitignore and next steps, the plan refusing what a run would only find later, and GitHub
annotations (`::warning` for WARN and INCONCLUSIVE, `file=` and `line=` where a stage file is
to blame)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from conftest import PY, REPO, Project, command_stage, qualify_proc

HELPERS = Path(__file__).parent / "helpers"


def plain_env(**extra: str) -> dict[str, str]:
    """The environment of a CI job: no terminal, no COLUMNS (rich would assume 80)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "GITHUB_ACTIONS", "FORCE_COLOR")}
    return {**env, **extra}


def proc(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """qualify as a process with exactly `env` (conftest's helper adds COLUMNS=200)."""
    return subprocess.run(
        [PY, "-m", "qualify", *args],
        env=env if env is not None else plain_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_short_version_flag() -> None:
    done = proc("-V")
    assert done.returncode == 0 and re.fullmatch(r"qualify \S+\n", done.stdout)


def test_shell_completion_script_and_protocol() -> None:
    # Left to itself typer asks shellingham which shell is among qualify's parent processes,
    # and ignores the shell named: started with no shell above it (a CI runner's, a service's
    # process) it printed "Shell  not supported." and exited 1. Typer's switch turns detection
    # off, so the shell is the one named, whoever started the suite.
    script = proc(
        "--show-completion", "bash", env=plain_env(_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    )
    assert script.returncode == 0 and "_QUALIFY_COMPLETE" in script.stdout, script.stderr
    assert "complete -o default -F _qualify_completion qualify" in script.stdout  # bash's, as named
    words = proc(env=plain_env(_QUALIFY_COMPLETE="complete_bash", COMP_WORDS="qualify ru", COMP_CWORD="1"))
    assert words.returncode == 0 and set(words.stdout.split()) == {"run", "runs"}
    option = proc(
        env=plain_env(_QUALIFY_COMPLETE="complete_bash", COMP_WORDS="qualify run --cand", COMP_CWORD="2")
    )
    assert option.stdout.split() == ["--candidate"]
    # An arm's name completes from the project's qualify.toml.
    example = str(REPO / "examples" / "llama-cpp")
    arms = proc(
        env=plain_env(
            _QUALIFY_COMPLETE="complete_bash",
            COMP_WORDS=f"qualify run -C {example} --candidate cl",
            COMP_CWORD="5",
        )
    )
    assert arms.stdout.split() == ["clang19"]


def test_argument_help_shows_no_python_types() -> None:
    for command in ("merge", "kernels", "show", "report", "init", "kinds"):
        done = proc(command, "--help")
        assert done.returncode == 0, done.stderr
        assert not re.search(r"<(list\[|path|str|Path)", done.stdout), (command, done.stdout)
    assert "RUN_DIR" in proc("merge", "--help").stdout


def test_a_reader_that_leaves_early_ends_the_command_quietly_with_0() -> None:
    """`qualify kinds | head -1`: before, exit 1 (NOT QUALIFIED's code) and a traceback."""
    for args in (("kinds",), ("kinds", "--json"), ("plan", "-C", str(REPO / "examples" / "llama-cpp"))):
        child = subprocess.Popen(
            [PY, "-m", "qualify", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=plain_env(),
        )
        assert child.stdout is not None and child.stderr is not None
        child.stdout.close()  # gone before qualify writes its first line
        err = child.stderr.read().decode()
        assert child.wait(timeout=120) == 0, (args, err)
        assert err == "", (args, err)


def test_a_run_whose_reader_left_exits_with_its_verdict(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "sleep 1"))
    child = subprocess.Popen(
        [PY, "-m", "qualify", "run", "--candidate", "cand", "-C", str(p.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=plain_env(),
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == 3, err  # INCOMPLETE: one stage of six configured
    assert "Traceback" not in err
    [run] = p.run_dirs()
    assert json.loads((run / "run.json").read_text())["status"] == "complete"  # not cut short


def test_report_json(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    p.stage("30-numerics.toml", command_stage("numerics", "false"))
    proc("run", "--candidate", "cand", "-C", str(p.root))
    [run] = p.run_dirs()
    done = proc("report", run.name, "-C", str(p.root), "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # stdout is the JSON and nothing else
    assert document["run_id"] == run.name and document["verdict"] == "NOT QUALIFIED"
    assert set(document["report"]) == {"html", "markdown", "json", "junit"}
    assert all(Path(path).is_file() for path in document["report"].values())
    assert document["rejudged"] == []


def test_off_a_terminal_nothing_is_wrapped_padded_or_cut(project: Callable[..., Project]) -> None:
    """Before: hard-wrapped at 80 columns, cells padded, run ids cut (`20261201-23…`)."""
    p = project()
    long_reason = "word " * 40
    p.stage("20-compile.toml", command_stage("compile", f"sh -c 'echo {long_reason.strip()}; exit 1'"))
    ran = proc("run", "--candidate", "cand", "-C", str(p.root))
    [run] = p.run_dirs()
    lines = ran.stdout.splitlines()
    assert any(long_reason.strip() in line for line in lines), ran.stdout  # echoed whole
    listing = proc("runs", "-C", str(p.root))
    assert listing.returncode == 0, listing.stderr
    row = next(line for line in listing.stdout.splitlines() if run.name in line)
    assert "NOT QUALIFIED" in row and "…" not in listing.stdout
    shown = proc("show", run.name, "-C", str(p.root))
    for out in (ran.stdout, listing.stdout, shown.stdout):
        assert all(line == line.rstrip() for line in out.splitlines()), out
    assert any(len(line) > 80 for line in shown.stdout.splitlines())  # no width imposed


def test_a_narrow_terminal_still_shows_run_ids_whole(project: Callable[..., Project]) -> None:
    """On a terminal, at 50 columns, the other columns wrap and the run id stays on one line."""
    import pty

    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    proc("run", "--candidate", "cand", "-C", str(p.root))
    [run] = p.run_dirs()
    pid, fd = pty.fork()
    if pid == 0:  # the child: qualify on a terminal of 50 columns
        os.environ.update(COLUMNS="50", LINES="40")
        os.execv(PY, [PY, "-m", "qualify", "runs", "-C", str(p.root)])
    out = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode(errors="replace"))
    assert run.name in text, text


def test_init_ignores_runs_and_says_what_comes_next(tmp_path: Path) -> None:
    """Before: no .gitignore, so the run's own runs/ made every later run "dirty"."""
    project = tmp_path / "engine"
    project.mkdir()
    (project / ".gitignore").write_text("build/")  # kept, and no newline at its end
    done = proc("init", str(project))
    assert done.returncode == 0, done.stderr
    assert (project / ".gitignore").read_text().splitlines()[0] == "build/"
    assert "runs/" in (project / ".gitignore").read_text().splitlines()
    # The distribution stage's cache and signing key (the default plan's): never committed.
    assert ".qualify/" in (project / ".gitignore").read_text().splitlines()
    assert "next:" in done.stdout
    for step in (
        "flake.nix",
        f"(umask 077 && nix key generate-secret --key-name engine-cache-1 > {project / '.qualify' / 'cache-key.sec'})",
        f"qualify doctor -C {project}",
        f"qualify plan -C {project}",
        "git",
        "qualify run",
    ):
        assert step in done.stdout, step
    again = proc("init", str(project), "--force")
    assert again.returncode == 0 and (project / ".gitignore").read_text().count("runs/") == 1
    assert (project / ".gitignore").read_text().splitlines().count("result") == 1
    # With the runs ignored, a run's own folder leaves the tree clean (what makes it not dirty);
    # and the links `nix build` leaves into the store are no untracked files of it either.
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "runs" / "x").mkdir(parents=True)
    (project / "runs" / "x" / "run.json").write_text("{}")
    for link in ("result", "result-dev", "result-1"):
        (project / link).symlink_to(tmp_path)
    status = subprocess.run(
        ["git", "-C", str(project), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "runs/" not in status.stdout and "result" not in status.stdout, status.stdout
    assert ".gitignore" in status.stdout  # git reads it: what is left out is left out by it


def test_the_plan_refuses_a_missing_flake_nix(project: Callable[..., Project]) -> None:
    """Before: found by the build stage mid-run (exit 3)."""
    p = project()
    p.stage("10-build.toml", '[[check]]\nkind = "nix-build"\nname = "arms"\n')
    done = qualify_proc("plan", "-C", str(p.root))
    assert done.returncode == 4
    assert f"{p.root.resolve()} has no flake.nix" in done.stderr and "build/arms" in done.stderr
    (p.root / "flake.nix").write_text("{ outputs = { self }: { }; }\n")
    assert qualify_proc("plan", "-C", str(p.root)).returncode == 0
    # A flake named by reference is nix's to resolve: nothing to look for here.
    remote = project('flake = "github:engine/llama"\n[arms.pinned]\ninstallable = ".#a"\n')
    remote.stage("10-build.toml", '[[check]]\nkind = "nix-build"\nname = "arms"\n')
    assert qualify_proc("plan", "-C", str(remote.root)).returncode == 0


def test_the_plan_refuses_port_where_no_server_is_started(project: Callable[..., Project]) -> None:
    """Before: the check ERRORed mid-run ("{port} is given only to checks that start a server")."""
    p = project()
    stage = p.stage("20-compile.toml", command_stage("compile", "curl http://127.0.0.1:{port}/health"))
    done = qualify_proc("plan", "-C", str(p.root))
    assert done.returncode == 4
    assert f"{stage}:5: check 'compile-check', run: {{port}} is used" in " ".join(done.stderr.split())
    # The same through a variable made with {port}.
    p2 = project(
        '[arms.pinned]\ninstallable = ".#a"\n[arms.cand]\ninstallable = ".#b"\n[vars]\nurl = "http://h:{port}"\n'
    )
    p2.stage("20-compile.toml", command_stage("compile", "curl {url}"))
    done = qualify_proc("plan", "-C", str(p2.root))
    assert done.returncode == 4 and "{url}, a variable made with {port}" in done.stderr
    # A server template is where {port} belongs: the example's serving and soak plans load.
    assert qualify_proc("plan", "-C", str(REPO / "examples" / "llama-cpp")).returncode == 0
    # A bench's run starts a server only under format = "llama-server".
    bench = '[[check]]\nkind = "bench"\nname = "b"\nrun = "llama-server --port {port}"\n'
    p3 = project()
    p3.stage("60-bench.toml", bench)
    done = qualify_proc("plan", "-C", str(p3.root))
    assert done.returncode == 4 and "run: {port} is used" in " ".join(done.stderr.split())
    p3.stage("60-bench.toml", bench + 'format = "llama-server"\n')
    assert qualify_proc("plan", "-C", str(p3.root)).returncode == 0


def test_a_refused_stage_file_is_annotated_at_its_line(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", 'name = "compile"\n[[check]]\nkind = "command"\nrun = "x {modle}"\n')
    env = plain_env(GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(p.root))
    done = proc("plan", "-C", str(p.root), env=env)
    assert done.returncode == 4
    [line] = [x for x in done.stdout.splitlines() if x.startswith("::error")]
    assert line.startswith(
        "::error file=stages/20-compile.toml,line=4,title=qualify%3A the plan is refused::"
    )
    assert "unknown placeholder {modle}" in line
    assert "::error" not in proc("plan", "-C", str(p.root)).stdout  # only in GitHub Actions


def test_warn_and_inconclusive_are_warnings_and_an_error_points_at_its_check(
    project: Callable[..., Project],
) -> None:
    """Before: only FAIL and ERROR were annotated (as errors), and never at a file."""
    p = project(
        """
        [arms.pinned]
        installable = ".#default"
        vars = { samples = "tps:higher:100,101,99" }
        [arms.cand]
        installable = ".#cand"
        vars = { samples = "tps:higher:90,97,99" }
        """
    )
    p.stage(
        "20-compile.toml",
        command_stage("compile", f'{PY} -c \'import sys; sys.exit(1 if "{{role}}" == "pinned" else 0)\''),
    )
    p.stage(
        "30-numerics.toml",
        f"""
name = "numerics"
inconclusive = "warn"
[[check]]
kind = "command"
name = "m"
run = "{{py}} {HELPERS / "emit_metrics.py"} {{out_file}} {{samples}}"
metrics = true
limits = {{ tps_margin = 0.05 }}
""",
    )
    proc("run", "--candidate", "cand", "-C", str(p.root), "--no-gate")
    [run] = p.run_dirs()
    env = plain_env(GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(p.root))
    done = proc("report", run.name, "-C", str(p.root), env=env)
    assert done.returncode == 0, done.stderr
    commands = [line for line in done.stdout.splitlines() if line.startswith("::")]
    warning = next(c for c in commands if "numerics/m" in c)
    assert warning.startswith("::warning title=qualify numerics/m%3A INCONCLUSIVE::"), commands
    error = next(c for c in commands if "compile/compile-check" in c)
    assert error.startswith(
        "::error file=stages/20-compile.toml,line=2,title=qualify compile/compile-check%3A ERROR::"
    ), commands
