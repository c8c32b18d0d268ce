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


URL_CONFIG = """
flake = "git+https://oauth2:{flake_token}@gitlab.example.com/o/r"
[arms.pinned]
installable = "git+https://oauth2:{pinned_token}@gitlab.example.com/o/r#default"
devshell = "git+https://oauth2:{devshell_token}@gitlab.example.com/o/r#default"
[arms.cand]
installable = "git+https://oauth2:{cand_token}@gitlab.example.com/o/r#cand"
devshell = "git+https://oauth2:{devshell_token}@gitlab.example.com/o/r#cand"
"""

#: A check that writes its arguments outside the run folder, prints every secret it finds in
#: a file (as a tool that echoes its configuration or its fetches would) and fails for the
#: candidate only.
LEAKY_CHECK = """
import pathlib, sys
seen, said, role = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
seen.write_text(chr(10).join(sys.argv[4:]))
print(said.read_text())
sys.exit(0 if role == "pinned" else 1)
"""


def test_url_tokens_and_the_secrets_nix_uses_reach_no_record_report_nor_annotation(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """Tokens in the flake URL, the arms' installable and devshell and `--override-input`, a
    NIX_CONFIG access token, netrc passwords (the file NIX_CONFIG names and ~/.netrc) and a URL's
    password, printed by a failing check: the child gets its URLs in clear; no file of the run
    folder (logs, run.json, stage.json, results, summary.md, junit.xml, report.html and .json),
    the step summary nor the console (`::error` lines) keeps any of them. A rerun of the saved
    run is not refused for its installables being saved redacted."""
    url_tokens = {
        "flake_token": "glpat-FlakeTok0123456789ab",
        "pinned_token": "glpat-InstTok0123456789abc",
        "devshell_token": "devshell-pw-77aa",
        "cand_token": "cand-inst-pw-88bb",
    }
    override_token = "override-pw-11ff"
    access = {"github": "nixconfig-tok-55cc", "gitlab": "gitlab-pat-tok-66ee"}
    netrc_pw, home_netrc_pw, url_pw = "netrc-file-pw-33dd", "home-netrc-pw-44ee", "printed-url-pw-99ee"
    secrets = [*url_tokens.values(), override_token, *access.values(), netrc_pw, home_netrc_pw, url_pw]

    p = project(URL_CONFIG.format(**url_tokens))
    (p.root / "leak.py").write_text(LEAKY_CHECK)
    said, seen = tmp_path / "said.txt", tmp_path / "seen"
    seen.mkdir()
    said.write_text(
        f"nix: using access token {access['github']} and PAT:{access['gitlab']}\n"
        f"netrc: {netrc_pw}, home: {home_netrc_pw}\n"
        f"fetching https://bob:{url_pw}@example.com/x\n"
        f"bare: {url_tokens['pinned_token']} {url_tokens['cand_token']} {url_tokens['devshell_token']} "
        f"{url_tokens['flake_token']} {override_token}\n"
    )
    p.stage(
        "20-compile.toml",
        f"""
        name = "compile"
        [[check]]
        kind = "command"
        name = "c"
        run = "{{py}} {{project}}/leak.py {seen}/{{role}} {said} {{role}} {{installable}} {{devshell}}"
        """,
    )
    home, netrc, conf_dir = tmp_path / "home", tmp_path / "netrc", tmp_path / "etc-nix"
    home.mkdir()
    conf_dir.mkdir()
    (home / ".netrc").write_text(f"machine gitlab.example.com login oauth2 password {home_netrc_pw}\n")
    netrc.write_text(f"machine example.com login u password {netrc_pw}\n")
    step_summary = tmp_path / "step-summary.md"
    env = {
        **os.environ,
        "HOME": str(home),
        "NIX_CONF_DIR": str(conf_dir),
        "NIX_CONFIG": f"access-tokens = github.com={access['github']} gitlab.com=PAT:{access['gitlab']}\n"
        f"netrc-file = {netrc}",
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(step_summary),
    }
    override = f"git+https://oauth2:{override_token}@gitlab.example.com/n/nixpkgs"
    done = qualify_proc(
        "run", "--candidate", "cand", "--project", str(p.root), "--override-input", f"nixpkgs={override}",
        env=env,
    )  # fmt: skip
    said_out = done.stdout + done.stderr
    assert done.returncode == 1, said_out  # the candidate failed the compile stage
    assert "::error" in done.stdout
    got = (seen / "candidate").read_text().splitlines()
    assert got == [
        f"git+https://oauth2:{url_tokens['cand_token']}@gitlab.example.com/o/r#cand",
        f"git+https://oauth2:{url_tokens['devshell_token']}@gitlab.example.com/o/r#cand",
    ]
    [run] = p.run_dirs()
    written = ["summary.md", "junit.xml", "report.html", "report.json", "run.json", "20-compile/stage.json"]
    assert [name for name in written if not (run / name).is_file()] == []
    assert step_summary.is_file()
    assert leaks(run, secrets, said_out, step_summary.read_text()) == []
    assert REDACTED in (run / "20-compile" / "c" / "logs" / "candidate-run.log").read_text()
    saved = json.loads((run / "run.json").read_text())
    hidden = f"git+https://oauth2:{REDACTED}@gitlab.example.com"  # the shape is kept
    assert saved["config"]["flake"] == f"{hidden}/o/r"
    assert saved["project"]["flake"] == saved["config"]["flake"]
    assert saved["config"]["arms"]["pinned"]["devshell"] == f"{hidden}/o/r#default"
    assert saved["roles"]["candidate"]["installable"] == f"{hidden}/o/r#cand"
    assert saved["roles"]["pinned"]["devshell"] == f"{hidden}/o/r#default"
    redacted_override = [["nixpkgs", f"{hidden}/n/nixpkgs"]]
    assert saved["options"]["override_inputs"] == redacted_override
    assert saved["invocations"][0]["override_inputs"] == redacted_override

    again = qualify_proc(
        "run", "--run", run.name, "--only", "compile", "--project", str(p.root), "--override-input",
        f"nixpkgs={override}", env=env,
    )  # fmt: skip
    assert again.returncode == 1, again.stdout + again.stderr
    assert leaks(run, secrets, again.stdout, again.stderr, step_summary.read_text()) == []


@pytest.mark.nix
@pytest.mark.skipif(not have_nix(), reason="nix is not installed")
def test_an_override_input_token_reaches_nix_but_no_record(tmp_path: Path) -> None:
    """`--override-input NAME URL` with a token in the URL: nix gets the URL as given (it cannot
    fetch it here, so the candidate's build fails and its messages are quoted); run.json,
    source.json, the build's records, logs, reports and the console keep
    `oauth2:<redacted>@`. A rerun that must build again and was not given the override again
    says so by name instead of handing nix `<redacted>`."""
    token = "override-tok-2b3c4d"
    engine = make_rocm_project(tmp_path / "p", PLAN)
    bin_dir = observing_nix(tmp_path)
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    # Port 9 (discard) on loopback: refused at once, nothing leaves the machine.
    url = f"git+https://oauth2:{token}@127.0.0.1:9/o/nixpkgs"
    done = qualify_proc(
        "run", "--candidate", "rocm10", "--project", str(engine), "--override-input", "nixpkgs-rocm10", url,
        env=env,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 1, said  # the candidate's build failed
    assert f"--override-input nixpkgs-rocm10 {url}" in (tmp_path / "nix-args").read_text()
    [run] = [d for d in (engine / "runs").iterdir() if (d / "run.json").is_file()]
    assert leaks(run, [token], said) == []
    redacted = [["nixpkgs-rocm10", f"git+https://oauth2:{REDACTED}@127.0.0.1:9/o/nixpkgs"]]
    assert json.loads((run / "run.json").read_text())["options"]["override_inputs"] == redacted
    assert json.loads((run / "10-build" / "arms" / "source.json").read_text())["override_inputs"] == redacted

    again = qualify_proc("run", "--run", run.name, "--only", "build", "--project", str(engine), env=env)
    assert again.returncode != 0
    source = json.loads((run / "10-build" / "arms" / "source.json").read_text())
    assert "--override-input nixpkgs-rocm10=" in source["error"]["hint"], source
    assert leaks(run, [token], again.stdout + again.stderr) == []


#: Prints a known secret (argv[2]) in the forms a program may print one in, tokens recognisable
#: by their form, and a URL's password in a URL then bare; then fails (the candidate). The
#: tokens are the script's own (`{tokens}`...): given as arguments, the command's record would
#: keep the ones only a form finds in output.
ENCODED_LEAKS = """
import base64, sys, urllib.parse
role, secret = sys.argv[1], sys.argv[2]
url_pw, tokens, bearer, netrc_pw = {url_pw!r}, {tokens!r}, {bearer!r}, {netrc_pw!r}
raw = secret.encode()
print("tail-marker: the last lines follow")
print("b64:", base64.b64encode(raw).decode(), "urlsafe:", base64.urlsafe_b64encode(raw).decode().rstrip("="))
print("hex:", raw.hex().upper(), "pct:", urllib.parse.quote(secret, safe=""))
print("split: " + secret[:9])
print(secret[9:] + " and https://bob:" + url_pw + "@example.com/x then " + url_pw)
print(" ".join(tokens))
print("Authorization: Bearer " + bearer + "  machine h login u password " + netrc_pw)
sys.exit(0 if role == "pinned" else 1)
"""

FORM_TOKENS = [
    "ghp_" + "Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8Ii9Jj0Kk1Ll2",
    "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnop",
    "glpat-" + "Zy9Xw8Vu7Ts6Rq5Po4Nm",
    "xoxb-" + "123456789012-abcdefABCDEF",
    "AKIA" + "Q2W3E4R5T6Y7U8I9",
]


def test_a_secret_in_any_encoding_or_form_in_a_failing_childs_last_lines_reaches_no_exit(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """A failing check's last lines reach its finding, and from there summary.md, junit.xml,
    the `::error` annotations, the step summary and `show --json`. Printed there: a known secret
    in base64 (standard, URL-safe), hex, percent-encoded and split over two lines; a URL's
    password in the URL and then bare; tokens known by their form alone (GitHub, GitLab, Slack,
    AWS, a Bearer token, a netrc password). None of them is kept anywhere, the last lines are."""
    import base64
    from urllib.parse import quote

    secret, url_pw, bearer, netrc_pw = (
        "hf-known-Secret-42xyz",
        "url-pw-Bare77q",
        "bt0k3n.abcDEF-123",
        "netrcPw-77x",
    )
    raw = secret.encode()
    hidden = [
        secret, base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode().rstrip("="),
        raw.hex().upper(), quote(secret, safe=""), secret[:9], secret[9:], url_pw, bearer, netrc_pw,
        *FORM_TOKENS,
    ]  # fmt: skip
    p = project(
        f'inherit_env = ["PATH"]\n[vars]\nhf_token = "{secret}"\n'
        '[arms.pinned]\ninstallable = ".#default"\n[arms.cand]\ninstallable = ".#cand"\n'
    )
    p.script(
        "leak.py", ENCODED_LEAKS.format(url_pw=url_pw, tokens=FORM_TOKENS, bearer=bearer, netrc_pw=netrc_pw)
    )
    p.stage(
        "20-compile.toml",
        """
        name = "compile"
        [[check]]
        kind = "command"
        name = "c"
        run = "{py} {project}/leak.py {role} {hf_token}"
        """,
    )
    step_summary = tmp_path / "step-summary.md"
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(step_summary)}
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root), env=env)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    [run] = p.run_dirs()
    shown = qualify_proc("show", run.name, "--json", "--project", str(p.root), env=env)
    assert shown.returncode == 0, shown.stderr
    annotations = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    exits = {
        "summary.md": (run / "summary.md").read_text(),
        "junit.xml": (run / "junit.xml").read_text(),
        "annotations": "\n".join(annotations),
        "step summary": step_summary.read_text(),
        "show --json": shown.stdout,
    }
    for name, text in exits.items():
        assert "tail-marker" in text, (name, text)  # the last lines do reach it
    assert leaks(run, hidden, said, shown.stdout, step_summary.read_text()) == []
    log = (run / "20-compile" / "c" / "logs" / "candidate-run.log").read_text()
    assert f"split: {REDACTED}\n{REDACTED} and https://bob:{REDACTED}@example.com/x then {REDACTED}" in log
