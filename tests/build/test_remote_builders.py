"""Builds on a nix remote builder, for real: an sshd on loopback (Debian's openssh-server, with
a throw-away host key and user key) in front of this machine's own nix, reached as
`ssh-ng://root@127.0.0.1` with `max-jobs = 0`, so nothing may be built locally. The remote side
runs `nix-daemon --stdio` through a small `remote-program` that gives it its own store (another
directory mounted over /nix in a private mount namespace: one store serving as its own builder
deadlocks on its path locks) and the local nix's settings (no build users, no binary cache). A builder that is down, and one that refuses
the key, are real too: a port nobody listens on, and the host key offered as the user's key.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import qualify_proc
from nixflakes import NIX_CONFIG, git, have_nix, make_rocm_project

SSHD = "/usr/sbin/sshd"

pytestmark = [
    pytest.mark.nix,
    pytest.mark.skipif(not have_nix(), reason="nix is not installed"),
    pytest.mark.skipif(not Path(SSHD).exists(), reason="no sshd (apt-get install openssh-server)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="sshd's privilege separation needs root"),
]


@dataclass(frozen=True)
class Builder:
    uri: str
    sshopts: str
    folder: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def remote_builder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Builder]:
    d = tmp_path_factory.mktemp("sshd")
    for key in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], check=True)
    shutil.copy(d / "user_key.pub", d / "authorized_keys")
    remote = d / "remote-nix"
    store = d / "builder-nix"
    store.mkdir()
    remote.write_text(
        f"#!/bin/sh\nexport NIX_CONFIG='{NIX_CONFIG}\nsandbox = false'\n"
        "exec unshare --mount --propagation private sh -c "
        f'\'mount --bind {store} /nix && exec nix-daemon "$@"\' sh "$@"\n'
    )
    remote.chmod(0o755)
    port = free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\nPidFile {d / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
    # -D: in the foreground, so the test owns the process and ends it.
    sshd = subprocess.Popen([SSHD, "-D", "-f", str(d / "sshd_config"), "-E", str(d / "sshd.log")])
    try:
        for _ in range(50):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        sshopts = (
            f"-p {port} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes "
            "-o ConnectTimeout=5"
        )
        yield Builder(f"ssh-ng://root@127.0.0.1?ssh-key={d / 'user_key'}&remote-program={remote}", sshopts, d)
    finally:
        sshd.terminate()
        sshd.wait(timeout=10)


def plan(builders: str) -> str:
    return f"""
name = "build"
[[check]]
kind = "nix-build"
name = "arms"
max_jobs = 0
builders = "{builders} x86_64-linux - 2 1"
"""


def run(project: Path, sshopts: str, *args: str) -> tuple[int, Path, str, float]:
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG, "NIX_SSHOPTS": sshopts}
    started = time.monotonic()
    proc = qualify_proc("run", "--candidate", "rocm10", *args, "--project", str(project), env=env)
    runs = sorted((project / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    return proc.returncode, runs[-1], proc.stdout + proc.stderr, time.monotonic() - started


def result(run_dir: Path) -> dict:
    return json.loads((run_dir / "10-build" / "arms" / "result.json").read_text())


def test_every_derivation_is_built_by_the_remote_builder(
    remote_builder: Builder, tmp_path_factory: pytest.TempPathFactory
) -> None:
    project = make_rocm_project(tmp_path_factory.mktemp("remote"), plan(remote_builder.uri))
    code, run_dir, out, _ = run(project, remote_builder.sshopts)
    res = result(run_dir)
    assert res["verdict"] == "PASS", out
    machines = set()
    for role in ("pinned", "candidate"):
        measurement = json.loads((run_dir / "10-build" / "arms" / role / "measurement.json").read_text())
        assert "--option" in measurement["extra_args"] and "builders" in measurement["extra_args"]
        machines |= {b["machine"] for b in measurement["built"]}
    assert machines == {remote_builder.uri}, "max-jobs = 0: nothing may be built on this machine"
    where = next(t for t in res["tables"] if t["title"].startswith("Derivations built, and where"))
    assert {row[2] for row in where["rows"]} == {remote_builder.uri}
    assert all(row[3].endswith(" s") for row in where["rows"])
    source = json.loads((run_dir / "10-build" / "arms" / "source.json").read_text())
    assert source["nix_options"]["builders"].startswith(remote_builder.uri)


def test_a_builder_that_is_down_is_an_error_naming_it(
    remote_builder: Builder, tmp_path_factory: pytest.TempPathFactory
) -> None:
    project = make_rocm_project(tmp_path_factory.mktemp("down"), plan(remote_builder.uri))
    sshopts = remote_builder.sshopts.replace(
        remote_builder.sshopts.split()[1], str(free_port())
    )  # nobody listens
    code, run_dir, out, seconds = run(project, sshopts)
    res = result(run_dir)
    assert res["verdict"] == "ERROR" and code != 0, out
    assert remote_builder.uri in res["reason"] and "did not answer" in res["reason"], res["reason"]
    assert "Connection refused" in res["reason"]
    assert seconds < 60, "refused before any evaluation or build"
    assert not (run_dir / "10-build" / "arms" / "plan.json").exists()


def test_a_builder_that_refuses_the_key_is_an_error_naming_it(
    remote_builder: Builder, tmp_path_factory: pytest.TempPathFactory
) -> None:
    wrong = remote_builder.uri.replace("user_key", "host_key")  # a key the builder does not accept
    project = make_rocm_project(tmp_path_factory.mktemp("refused"), plan(wrong))
    code, run_dir, out, _ = run(
        project, remote_builder.sshopts, "--nix-option", "builders-use-substitutes=false"
    )
    res = result(run_dir)
    assert res["verdict"] == "ERROR", out
    assert wrong in res["reason"] and "Permission denied" in res["reason"], res["reason"]
    git(project, "status")  # the project is untouched: nothing was built
