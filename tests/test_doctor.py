"""`qualify doctor`: nix's features as a run calls nix, the compilers' versions, and with `-C` what
a project's run needs (the plan, the flake and its arms, the data files, the numerics disk); every
problem with its fix, exit 1 when a run could not start.

The tests that ask nix run the real one (they use the `nix_flakes` fixture, which marks them nix);
the project's flake holds derivations made with `builtins.derivation` and /bin/sh, so no nixpkgs
is needed to evaluate its arms. The others need no nix: where it is missing, doctor says so and
goes on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from collections.abc import Mapping
from pathlib import Path

from conftest import qualify_proc
from nixflakes import NIX_CONFIG

from qualify.doctor import version_line

FLAKE = """
{
  outputs = { self }: {
    packages.x86_64-linux.default = builtins.derivation {
      name = "engine"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo > $out" ];
    };
  };
}
"""


def doctor(
    *args: str, env: Mapping[str, str] | None = None, nix_config: str = NIX_CONFIG
) -> tuple[int, dict[str, dict[str, object]], str]:
    done = qualify_proc("doctor", "--json", *args, env={**(env or os.environ), "NIX_CONFIG": nix_config})
    found = {p["what"]: p for p in json.loads(done.stdout)}
    return done.returncode, found, done.stderr


def test_flakes_disabled_where_a_run_calls_nix_is_a_problem_with_its_fix(nix_flakes: dict[str, str]) -> None:
    """Before, doctor saw nix on PATH and exited 0; the run then failed on `nix flake metadata`."""
    code, found, _ = doctor(env=nix_flakes, nix_config="experimental-features =\nbuild-users-group =")
    assert code == 1
    assert not found["nix flakes"]["ok"] and "nix-command" in str(found["nix flakes"]["detail"])
    assert "experimental-features = nix-command flakes" in str(found["nix flakes"]["fix"])
    code, found, _ = doctor(
        env=nix_flakes, nix_config="experimental-features = nix-command\nbuild-users-group ="
    )
    assert "flakes" in str(found["nix flakes"]["detail"]) and not found["nix flakes"]["ok"]
    code, found, _ = doctor(env=nix_flakes)
    assert found["nix flakes"]["ok"], found["nix flakes"]


def test_the_plain_listing_prints_the_fix_and_exits_1(nix_flakes: dict[str, str]) -> None:
    done = qualify_proc("doctor", env={**nix_flakes, "NIX_CONFIG": "experimental-features ="})
    assert done.returncode == 1
    assert "nix flakes: enable them" in done.stderr and "~/.config/nix/nix.conf" in done.stderr


def test_the_build_checks_env_is_the_one_probed(tmp_path: Path, nix_flakes: dict[str, str]) -> None:
    """A project whose build check sets NIX_CONFIG itself: its run has flakes even where
    qualify's own environment has none, and doctor -C says so."""
    project = tmp_path / "proj"
    (project / "stages").mkdir(parents=True)
    (project / "qualify.toml").write_text('plan = "stages"\n[arms.pinned]\ninstallable = ".#default"\n')
    (project / "flake.nix").write_text(FLAKE)
    config = NIX_CONFIG.replace("\n", "\\n")
    (project / "stages" / "10-build.toml").write_text(
        f'[[check]]\nkind = "nix-build"\nname = "arms"\nenv = {{ NIX_CONFIG = "{config}" }}\n'
    )
    _, found, _ = doctor(env=nix_flakes, nix_config="experimental-features =")
    assert not found["nix flakes"]["ok"]
    _, found, _ = doctor("-C", str(project), env=nix_flakes, nix_config="experimental-features =")
    assert found["nix flakes"]["ok"], found["nix flakes"]


def test_a_project_s_flake_arms_and_data_files(tmp_path: Path, nix_flakes: dict[str, str]) -> None:
    project = tmp_path / "proj"
    (project / "stages").mkdir(parents=True)
    (project / "data").mkdir()
    (project / "data" / "corpus.txt").write_text("text\n")
    (project / "qualify.toml").write_text(
        textwrap.dedent(
            """
            plan = "stages"
            [arms.pinned]
            installable = ".#default"
            [arms.cand]
            installable = ".#nosuch"
            [vars]
            model = "{project}/models/m.gguf"
            corpus = "data/corpus.txt"
            engine_args = ["-ngl", "99"]
            """
        )
    )
    (project / "stages" / "10-build.toml").write_text('[[check]]\nkind = "nix-build"\nname = "arms"\n')
    code, found, _ = doctor("-C", str(project), env=nix_flakes)
    assert code == 1
    assert found["plan"]["ok"]
    assert not found["flake"]["ok"] and "flake.nix" in str(found["flake"]["fix"])
    assert not found["vars.model"]["ok"] and "not found" in str(found["vars.model"]["detail"])
    assert '"{project}/data/corpus.txt"' in str(found["vars.corpus"]["fix"])  # read from the run
    assert "vars.engine_args" not in found  # not a file

    (project / "flake.nix").write_text(FLAKE)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(["git", "-C", str(project), "add", "flake.nix"], check=True)
    code, found, _ = doctor("-C", str(project), env=nix_flakes)
    assert found["flake"]["ok"], found["flake"]
    assert found["arm pinned"]["ok"] and str(found["arm pinned"]["detail"]).endswith("-engine.drv")
    assert not found["arm cand"]["ok"] and "nosuch" in str(found["arm cand"]["detail"])
    assert code == 1


def test_a_plan_that_does_not_load_is_a_problem(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "stages").mkdir(parents=True)
    (project / "qualify.toml").write_text('plan = "stages"\n[arms.pinned]\ninstallable = ".#default"\n')
    (project / "stages" / "20-compile.toml").write_text('[[check]]\nkind = "command"\nrun = "x {modle}"\n')
    code, found, _ = doctor("-C", str(project))
    assert code == 1 and not found["plan"]["ok"] and "modle" in str(found["plan"]["detail"])


def test_numerics_disk_against_what_the_check_states(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "stages").mkdir(parents=True)
    (project / "qualify.toml").write_text(
        'plan = "stages"\n[arms.pinned]\ninstallable = ".#default"\n[arms.reference]\ninstallable = ".#r"\n'
    )
    free = shutil.disk_usage(tmp_path).free
    stage = '[[check]]\nkind = "kld"\nroles = ["pinned", "candidate", "reference"]\nrun = "x {{out_file}}"\nartifact_bytes = {n}\n'
    (project / "stages" / "30-numerics.toml").write_text(stage.format(n=free))  # x3 stored: too much
    code, found, _ = doctor("-C", str(project))
    disk = found["disk for numerics/kld"]
    assert code == 1 and not disk["ok"] and "GiB free" in str(disk["detail"])
    (project / "stages" / "30-numerics.toml").write_text(stage.format(n=1000))
    _, found, _ = doctor("-C", str(project))
    assert found["disk for numerics/kld"]["ok"]


def test_nvcc_is_reported_with_its_version() -> None:
    """Before, `nvcc --version`'s first line ("nvcc: NVIDIA (R) Cuda compiler driver") was all."""
    text = (
        "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
        "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release 13.0, V13.0.88\n"
    )
    assert version_line(text) == "Cuda compilation tools, release 13.0, V13.0.88"
    assert (
        version_line("gcc (Debian 12.2.0-14) 12.2.0\nCopyright (C) 2022\n") == "gcc (Debian 12.2.0-14) 12.2.0"
    )
    if shutil.which("nvcc") is None:
        return
    _, found, _ = doctor()
    assert "release" in str(found["nvcc"]["detail"])


def test_an_artifact_s_size_is_read_from_the_newest_typed_numerics_record(tmp_path: Path) -> None:
    from qualify.core.runstore import write_json
    from qualify.doctor import _last_artifact_bytes
    from qualify.records.numerics import NumericsRecord

    def record(run: str, document: dict[str, object]) -> None:
        folder = tmp_path / run / "30-numerics" / "kld"
        folder.mkdir(parents=True)
        write_json(folder / "numerics.json", document)

    assert _last_artifact_bytes(tmp_path, "30-numerics", "kld") is None
    disk = {"stored": ["pinned", "candidate"], "bytes": 3000, "free": 10**9}
    record("20260101-a", NumericsRecord.load({"disk": disk}, "numerics.json").to_json())
    assert _last_artifact_bytes(tmp_path, "30-numerics", "kld") == 1500
    # A newer record whose size is not a number says nothing: the one before it is read.
    record("20260102-b", {"version": 1, "disk": {**disk, "bytes": "3000"}})
    assert _last_artifact_bytes(tmp_path, "30-numerics", "kld") == 1500


def test_the_table_fits_100_columns_off_a_terminal() -> None:
    """Before, piped or in a CI log the table grew to its longest cell: about 270 columns. Now
    it is drawn in 100 columns, each cell wrapped (a path folded) within its column, nothing cut."""
    env = {**os.environ, "NIX_CONFIG": "experimental-features ="}
    done = qualify_proc("doctor", env=env)
    lines = done.stdout.splitlines()
    assert lines[0] == "qualify doctor"
    assert max(len(line) for line in lines) <= 100, done.stdout
    assert "…" not in done.stdout
    # Every probe's finding is there whole, read back across its wrapped (or folded) lines.
    cells = "".join("".join(line.split("│")[3].split()) for line in lines if line.count("│") == 5)
    for probe in json.loads(qualify_proc("doctor", "--json", env=env).stdout):
        assert "".join(probe["detail"].split()) in cells, probe


def test_a_secret_named_variable_is_never_printed_even_when_it_holds_a_slash(tmp_path: Path) -> None:
    """CI prints doctor's output in the job's log. Before, a secret-named variable whose value
    held a `/` was taken for a file and printed in clear, with a fix repeating it."""
    project = tmp_path / "proj"
    (project / "stages").mkdir(parents=True)
    token, key, password = "hf_Ab/cdEfGh1234567890xyzw", "/wJalrXUtnFEMI/K7MDENG", "s3cr3t/pass/word"
    (project / "qualify.toml").write_text(
        textwrap.dedent(
            f"""
            plan = "stages"
            [arms.pinned]
            installable = ".#default"
            vars = {{ api_key = "{key}" }}
            [vars]
            hf_token = "{token}"
            db_password = "{password}"
            model = "{{project}}/models/m.gguf"
            """
        )
    )
    (project / "stages" / "10-build.toml").write_text('[[check]]\nkind = "nix-build"\nname = "arms"\n')
    for args in (("--json",), ()):
        done = qualify_proc("doctor", *args, "-C", str(project), env={**os.environ, "NIX_CONFIG": NIX_CONFIG})
        said = done.stdout + done.stderr
        for secret in (token, key, password, "s3cr3t", "wJalrXUtnFEMI", "cdEfGh1234567890"):
            assert secret not in said, said
        assert "vars.model" in said or "models/m.gguf" in said, said  # a file is still checked
