"""Secrets given to a run reach the processes that need them and no record: not the run
folder (run.json, stage.json, result.json, measurement.json, source.json, processes.jsonl,
logs), not the console. Real processes throughout: qualify's process runner, `qualify run` as
a process, and real nix for the nix options."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from conftest import PY, Project, qualify_proc
from nixflakes import NIX_CONFIG, have_nix, make_rocm_project

from qualify.core import process, provenance
from qualify.core.environment import child_env
from qualify.core.groups import recording_groups
from qualify.core.redaction import REDACTED
from qualify.core.runstore import write_json

#: A child that writes the arguments it got to a file (outside the run folder), one a line.
WRITE_ARGS = "import sys, pathlib; pathlib.Path(sys.argv[1]).write_text(chr(10).join(sys.argv[2:]))"


def leaks(folder: Path, secrets: Iterable[str], *texts: str) -> list[str]:
    """Where any of `secrets` is found: files under `folder` and the given texts."""
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            content = path.read_bytes().decode("utf-8", errors="replace")
            found += [f"{path.relative_to(folder)}: {s}" for s in secrets if s in content]
    for index, text in enumerate(texts):
        found += [f"text {index}: {s}" for s in secrets if s in text]
    return found


def test_a_secret_in_argv_reaches_the_child_but_no_record(tmp_path: Path) -> None:
    """measurement.json (the command's record), processes.jsonl, the log and the echo."""
    secrets = ["argv-key-7f3a9", "argv-token-0c1d2", "argv-bearer-99e8f", "argv-url-pw-4b5c6"]
    seen, run = tmp_path / "seen.txt", tmp_path / "run"
    argv = [
        PY, "-c", WRITE_ARGS, str(seen),
        "--api-key", secrets[0], f"--token={secrets[1]}",
        "-H", f"Authorization: Bearer {secrets[2]}", f"https://bob:{secrets[3]}@example.com/m.gguf",
    ]  # fmt: skip
    echoed: list[str] = []
    with recording_groups(run / "processes.jsonl"):
        run.mkdir()
        done = process.run(argv, log=run / "logs" / "x.log", env=child_env(), echo=echoed.append)
    write_json(run / "measurement.json", {"command": done.as_json()})
    assert done.ok
    assert seen.read_text().splitlines() == argv[4:]  # the child got every secret as it was
    assert (run / "processes.jsonl").is_file() and (run / "logs" / "x.log").is_file()
    assert leaks(run, secrets, *echoed) == []
    recorded = json.loads((run / "measurement.json").read_text())["command"]["argv"]
    assert recorded[4:] == [
        "--api-key", REDACTED, f"--token={REDACTED}",
        "-H", f"Authorization: Bearer {REDACTED}", f"https://bob:{REDACTED}@example.com/m.gguf",
    ]  # fmt: skip


def test_another_process_on_the_gpu_is_recorded_without_its_secrets(tmp_path: Path) -> None:
    """run.json's provenance lists the processes holding a GPU with their command lines (read
    from /proc): a server started with its API key is listed with the key redacted."""
    secret = "gpu-neighbour-key-5a6b"
    with subprocess.Popen(
        [PY, "-c", "import time; time.sleep(60)", "--api-key", secret, "--port", "8080"]
    ) as child:
        try:
            proc = Path("/proc") / str(child.pid)
            deadline = time.monotonic() + 10
            while b"--port" not in proc.joinpath("cmdline").read_bytes() and time.monotonic() < deadline:
                time.sleep(0.01)  # until the child has exec'd Python
            command = provenance._command(proc)
        finally:
            child.kill()
    assert secret not in command
    assert command.endswith(f"--api-key {shlex.quote(REDACTED)} --port 8080")


CONFIG = """
inherit_env = ["PATH"]
[vars]
hf_token = "hf-var-secret-1a2b"
api_key = "key-var-secret-3c4d"
db_password = "pw-var-secret-5e6f"
seen = "{seen}"
[arms.pinned]
installable = ".#default"
env = {{ SERVICE_TOKEN = "env-secret-7a8b" }}
vars = {{ upstream_secret = "arm-secret-9c0d" }}
[arms.cand]
installable = ".#cand"
env = {{ SERVICE_TOKEN = "env-secret-7a8b" }}
vars = {{ upstream_secret = "arm-secret-9c0d" }}
"""

SECRETS = [
    "hf-var-secret-1a2b",
    "key-var-secret-3c4d",
    "pw-var-secret-5e6f",
    "env-secret-7a8b",
    "arm-secret-9c0d",
]


def test_secret_variables_reach_the_command_but_no_record_nor_the_console(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """A variable named like a secret, put by the template where no rule by name or form can
    see it (a bare argument), is redacted by its value; the child gets every value in clear."""
    seen = tmp_path / "seen"
    seen.mkdir()
    p = project(CONFIG.format(seen=seen))
    p.stage(
        "20-compile.toml",
        f"""
        name = "compile"
        [[check]]
        kind = "command"
        name = "c"
        run = '''{{py}} -c "{WRITE_ARGS}" {{seen}}/{{role}} {{hf_token}} --api-key {{api_key}} 'Authorization: Bearer {{db_password}}' https://u:{{upstream_secret}}@example.com/x'''
        """,
    )
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert done.returncode == 3, done.stdout + done.stderr  # the later stages are not configured
    got = (seen / "candidate").read_text().splitlines()
    assert got[:3] == [SECRETS[0], "--api-key", SECRETS[1]]
    assert SECRETS[2] in got[3] and SECRETS[4] in got[4]
    [run] = p.run_dirs()
    assert leaks(run, SECRETS, done.stdout, done.stderr) == []
    saved = json.loads((run / "run.json").read_text())
    assert saved["config"]["vars"]["hf_token"] == REDACTED
    assert saved["config"]["arms"]["cand"]["vars"]["upstream_secret"] == REDACTED
    stage = json.loads((run / "20-compile" / "stage.json").read_text())
    assert stage["config"]["vars"]["api_key"] == REDACTED
    argv = json.loads((run / "20-compile" / "c" / "candidate" / "measurement.json").read_text())["command"][
        "argv"
    ]
    assert argv[4:] == [
        REDACTED,
        "--api-key",
        REDACTED,
        f"Authorization: Bearer {REDACTED}",
        f"https://u:{REDACTED}@example.com/x",
    ]


def test_qualify_plan_does_not_print_a_secret_variable(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = project(CONFIG.format(seen=tmp_path))
    p.stage(
        "20-compile.toml",
        """
        name = "compile"
        [[check]]
        kind = "command"
        name = "c"
        run = "true {api_key}"
        vars = { stage_token = "plan-var-secret-2f3e" }
        """,
    )
    done = qualify_proc("plan", "--project", str(p.root))
    assert done.returncode == 0, done.stderr
    assert "stage_token" in done.stdout and "plan-var-secret-2f3e" not in done.stdout


PLAN = """
name = "build"
[[check]]
kind = "nix-build"
name = "arms"
"""

ACCESS_TOKEN = "ghp_" + "Q7w8E9r0T1y2U3i4O5p6A7s8D9f0G1h2J3k4"
NETRC_PASSWORD = "netrc-pw-6d7e8f"


def observing_nix(folder: Path) -> Path:
    """A directory whose `nix` notes its arguments in `folder/nix-args` and runs the real nix
    (found on PATH before it): the only way to see from outside what nix itself was given."""
    real = next(Path(d) / "nix" for d in os.environ["PATH"].split(os.pathsep) if (Path(d) / "nix").is_file())
    bin_dir = folder / "observed-bin"
    bin_dir.mkdir()
    script = bin_dir / "nix"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {folder / "nix-args"}\nexec {real} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bin_dir


@pytest.mark.nix
@pytest.mark.skipif(not have_nix(), reason="nix is not installed")
def test_a_nix_access_token_reaches_nix_but_no_record(tmp_path: Path) -> None:
    """`--nix-option access-tokens=...` and `netrc-file`: nix gets them; run.json, source.json,
    the build's measurements, results, logs and the console keep `access-tokens=<redacted>`.
    A resume that must build again and was not given the token again says so by name."""
    engine = make_rocm_project(tmp_path / "p", PLAN)
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine example.com login u password {NETRC_PASSWORD}\n")
    bin_dir = observing_nix(tmp_path)
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = qualify_proc(
        "run", "--candidate", "rocm10", "--project", str(engine),
        "--nix-option", f"access-tokens=github.com={ACCESS_TOKEN}", "--nix-option", f"netrc-file={netrc}",
        env=env,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 3, said  # built; the later stages are not configured
    assert f"--option access-tokens github.com={ACCESS_TOKEN}" in (tmp_path / "nix-args").read_text()
    [run] = [d for d in (engine / "runs").iterdir() if (d / "run.json").is_file()]
    assert leaks(run, [ACCESS_TOKEN, NETRC_PASSWORD], said) == []
    source = json.loads((run / "10-build" / "arms" / "source.json").read_text())
    assert source["nix_options"]["access-tokens"] == REDACTED
    options = json.loads((run / "run.json").read_text())["options"]["nix_options"]
    # The netrc file's path is kept: the secret is in the file, which is never read or saved.
    assert ["access-tokens", REDACTED] in options and ["netrc-file", str(netrc)] in options

    again = qualify_proc(
        "run", "--run", run.name, "--only", "build", "--force", "--project", str(engine), env=env
    )
    assert again.returncode != 0
    source = json.loads((run / "10-build" / "arms" / "source.json").read_text())
    assert (
        "access-tokens" in source["error"]["message"]
        and "--nix-option access-tokens=" in source["error"]["hint"]
    )
    assert leaks(run, [ACCESS_TOKEN], again.stdout + again.stderr) == []
