"""Fleet hosts use the cache: the build stage substitutes the arms from the plan's binary cache
(the distribution stage's `binary-cache` check) where the host has it, on the fixture project of
tests/distribution/distflakes.py, with real nix and `qualify run` as a process.

A fleet host is stood for by an empty store: nix's chroot store (`store = /some/folder` in
NIX_CONFIG), which nix substitutes into without a sandbox but cannot build in here (its builder,
/bin/sh, is not in the chroot). So an arm built there with nothing built proves the cache served
all of it, and the same arm without the cache, or from a cache nix must not trust, fails to build.
The run that fills the cache is an A/A run of the candidate (`--pinned cand --candidate cand`): the
cache holds that one arm's closure, which every role of such a run builds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import REPO, qualify_proc
from distflakes import make_project, new_key, outside
from helpers.actions_runner import Artifacts, JobRunner
from nixflakes import NIX_CONFIG, git, have_nix, nix_env

pytestmark = [pytest.mark.nix, pytest.mark.skipif(not have_nix(), reason="nix is not installed")]

#: The distribution stage of these runs: the cache alone, and a profile that gives hosts its
#: public key (PUBLIC, filled in once the project's key exists).
CACHE_ONLY = """
name = "distribution"
[[check]]
kind = "binary-cache"
name = "cache"
cache = "{dist}/cache"
secret_key_file = "{dist}/cache-key.sec"
[profiles.fleet.check.cache]
public_key = "PUBLIC"
"""

BUILD = """
name = "build"
[[check]]
kind = "nix-build"
name = "arms"
toolchain = { tool = '^tool-(?P<version>\\d+)$' }
"""

AA = ("--pinned", "cand", "--candidate", "cand")
#: The build stage of such a run again, measured anew.
REBUILD = ("--pinned", "cand", "--only", "build", "--force")


def fresh_store(root: Path) -> dict[str, str]:
    """nix's environment for an empty chroot store under `root`: a host that has none of the arms."""
    return {**nix_env(), "NIX_CONFIG": f"{NIX_CONFIG}\nstore = {root}"}


def run(project: Path, env: dict[str, str], *args: str) -> tuple[int, Path, str]:
    done = qualify_proc("run", *args, "--project", str(project), env=env)
    runs = sorted((project / "runs").glob("*/run.json"), key=lambda p: p.stat().st_mtime)
    return done.returncode, runs[-1].parent, done.stdout + done.stderr


def build_check(run_dir: Path) -> Path:
    return run_dir / "10-build" / "arms"


def measured(run_dir: Path, role: str) -> dict:
    return json.loads((build_check(run_dir) / role / "measurement.json").read_text())


def result(run_dir: Path) -> dict:
    return json.loads((build_check(run_dir) / "result.json").read_text())


def caches(run_dir: Path) -> list[dict]:
    return json.loads((build_check(run_dir) / "caches.json").read_text())["caches"]


def rows(res: dict, title: str) -> dict[str, str]:
    return {r[0]: r[1] for r in next(t["rows"] for t in res["tables"] if t["title"] == title)}


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str, int]:
    """The project, its cache filled by an A/A run of the candidate on this host's store:
    (project, that run, the cache's public key, the paths of the candidate's closure)."""
    project = make_project(tmp_path_factory.mktemp("fleet"), CACHE_ONLY)
    secret = outside(project, "dist") / "cache-key.sec"
    public = subprocess.run(
        ["nix", "key", "convert-secret-to-public"],
        stdin=secret.open("rb"),
        env=nix_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    stage = project / "stages" / "70-distribution.toml"
    stage.write_text(stage.read_text().replace("PUBLIC", public))
    # The fixture engine's toolchain is its tool derivation: named, so that the build can PASS.
    (project / "stages" / "10-build.toml").write_text(BUILD)
    git(project.parent, "commit", "-qam", "the fleet profile trusts the cache's key")
    code, run_dir, out = run(project, nix_env(), *AA)
    assert code == 0, out[-3000:]
    cache = json.loads((run_dir / "70-distribution" / "cache" / "candidate" / "measurement.json").read_text())
    assert cache["paths"] >= 2 and (outside(project, "dist") / "cache" / "nix-cache-info").is_file()
    # When the build ran, the distribution stage had not made the cache yet: nothing to use.
    (first,) = caches(run_dir)
    assert not first["used"] and not first["present"] and "no cache at" in first["why"], first
    return project, run_dir, public, cache["paths"]


@contextmanager
def moved(path: Path) -> Iterator[Path]:
    """`path` moved aside for the block, then put back."""
    aside = path.with_name(path.name + ".aside")
    path.rename(aside)
    try:
        yield aside
    finally:
        if path.exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        aside.rename(path)


def test_a_host_with_the_plan_cache_substitutes_every_arm_and_builds_nothing(
    filled: tuple[Path, Path, str, int], tmp_path: Path
) -> None:
    project, _, public, paths = filled
    store = tmp_path / "host"
    code, run_dir, out = run(project, fresh_store(store), *AA)
    assert code == 0, out[-3000:]
    (cache,) = caches(run_dir)
    url = f"file://{outside(project, 'dist') / 'cache'}"
    assert cache["used"] and cache["cache"] == url and cache["key_from"] == "secret_key_file", cache
    assert cache["public_key"] == public  # the half of the secret key file, made here
    pinned = measured(run_dir, "pinned")
    assert pinned["ok"] and pinned["built"] == [], pinned["built"]
    assert pinned["substitution"]["paths"] == {url: paths} and not pinned["substitution"]["untrusted"]
    args = pinned["extra_args"]
    assert ["--option", "extra-substituters", url] == args[args.index("extra-substituters") - 1 :][:3]
    assert "require-sigs" in args and args[args.index("require-sigs") + 1] == "true"
    # The arm is in the fresh store, came from there and nowhere else.
    listed = subprocess.run(
        ["nix", "path-info", "--json", "--store", str(store), pinned["out"]],
        env=nix_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(listed.stdout)[0]["path"] == pinned["out"]
    res = result(run_dir)
    assert res["verdict"] == "PASS", res["findings"]
    assert (
        res["reason"]
        == f"2 roles built from one revision (0 derivations built, {paths} paths substituted from the plan's cache)"
    )
    came = rows(res, "Substituted or built")
    assert came["pinned"] == f"substituted {paths} paths from {url}, built 0 derivations", came
    assert came["plan's cache (distribution/cache)"] == f"{url}: trusted by engine-cache-1"
    assert f"pinned: substituted {paths} paths from {url}, built 0 derivations" in out
    # The distribution stage compares its own substitution with the build's: nothing built here.
    proved = json.loads((run_dir / "70-distribution" / "cache" / "result.json").read_text())
    assert rows(proved, f"Binary cache {url}")["build (build/arms) (s)"].startswith(
        f"nothing built in this run ({paths} paths substituted from this cache; nix build "
    )
    # The secret key was read to derive its public half: never written anywhere of the run.
    encoded = (outside(project, "dist") / "cache-key.sec").read_text().strip().partition(":")[2]
    for path in run_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert encoded[:40].encode() not in path.read_bytes(), path


def test_without_the_secret_a_host_trusts_the_cache_by_the_plans_public_key(
    filled: tuple[Path, Path, str, int], tmp_path: Path
) -> None:
    """The secret key is not on this host. Without `public_key` the cache is not used, the
    build says why, and the fresh store cannot build the arm; with the fleet profile's
    `public_key` the arm is substituted whole. A whole run there (the distribution stage
    included) proves the cache it was given without filling it; without a public key it is
    refused before anything starts, naming the key file and the public_key it would need."""
    project, made, public, paths = filled
    with moved(outside(project, "dist") / "cache-key.sec"):
        code, run_dir, out = run(project, fresh_store(tmp_path / "a"), "--run", made.name, *REBUILD)
        assert code != 0
        (cache,) = caches(run_dir)
        assert cache["present"] and not cache["used"] and cache["public_key"] is None
        res = result(run_dir)
        assert res["verdict"] in ("ERROR", "FAIL"), res
        warned = [f["message"] for f in res["findings"] if f["verdict"] == "WARN"]
        assert any(
            "was not used: the check gives no public_key, and secret_key_file" in w and "does not exist" in w
            for w in warned
        ), warned
        assert measured(run_dir, "pinned")["substitution"]["paths"] == {}
        assert not measured(run_dir, "pinned")["ok"]  # nothing here can build it

        code, _, out = run(project, nix_env(), *AA)
        assert code == 4 and "secret_key_file" in out and "public_key" in out, out[-2000:]
        code, fleet_run, out = run(project, nix_env(), *AA, "--profile", "fleet")
        assert code == 0, out[-3000:]
        proof = json.loads((fleet_run / "70-distribution" / "cache" / "result.json").read_text())
        assert proof["verdict"] == "PASS" and proof["reason"].startswith("filled elsewhere, proved here"), (
            proof
        )
        said = rows(proof, f"Binary cache file://{outside(project, 'dist') / 'cache'}")
        assert said["copy to the cache (s)"].startswith("none: filled elsewhere, no secret key here"), said
        saved = json.loads(
            (fleet_run / "70-distribution" / "cache" / "candidate" / "measurement.json").read_text()
        )
        assert not saved["filled_here"] and saved["copied"] is None and saved["signed_by"] is None
        assert saved["substituted_paths"] == saved["paths"] == paths
        # No cache here either: nothing to prove, said as the check's error.
        with moved(outside(project, "dist") / "cache"):
            code, again, out = run(
                project,
                nix_env(),
                "--run",
                fleet_run.name,
                "--pinned",
                "cand",
                "--only",
                "distribution",
                "--force",
            )
        res = json.loads((again / "70-distribution" / "cache" / "result.json").read_text())
        assert res["verdict"] == "ERROR" and "no binary cache at" in res["reason"], res
    with moved(outside(project, "dist") / "cache-key.sec"):
        code, run_dir, out = run(project, fresh_store(tmp_path / "b"), "--run", fleet_run.name, *REBUILD)
    (cache,) = caches(run_dir)
    assert cache["used"] and cache["key_from"] == "public_key" and cache["public_key"] == public, cache
    pinned = measured(run_dir, "pinned")
    assert pinned["ok"] and pinned["built"] == [] and sum(pinned["substitution"]["paths"].values()) == paths
    assert result(run_dir)["verdict"] == "PASS", result(run_dir)["findings"]


@pytest.mark.parametrize("signer", ["unsigned", "another key"])
def test_a_cache_not_signed_by_the_plans_key_is_not_used(
    filled: tuple[Path, Path, str, int], tmp_path: Path, signer: str
) -> None:
    """The cache's paths copied there unsigned, or signed by another key: nix will not take
    them (require-sigs stays on), says so, and the fresh store cannot build the arm; the build
    stage reports it, with nix's count, never as an internal error."""
    project, made, _, paths = filled
    cache = outside(project, "dist") / "cache"
    out_path = json.loads((made / "run.json").read_text())["roles"]["candidate"]["out"]
    with moved(cache):
        url = f"file://{cache}"
        if signer == "another key":
            new_key(tmp_path / "other.sec", "other-cache-1")
            url += f"?secret-key={tmp_path / 'other.sec'}"
        subprocess.run(["nix", "copy", "--to", url, out_path], env=nix_env(), check=True, capture_output=True)
        code, run_dir, out = run(project, fresh_store(tmp_path / "s"), "--run", made.name, *REBUILD)
    assert code != 0
    res = result(run_dir)
    assert res["verdict"] in ("ERROR", "FAIL") and "internal error" not in res["reason"], res["reason"]
    pinned = measured(run_dir, "pinned")
    assert pinned["substitution"]["untrusted"] == {f"file://{cache}": paths}, pinned["substitution"]
    assert pinned["substitution"]["paths"] == {} and not pinned["ok"]
    warned = [f["message"] for f in res["findings"] if f["verdict"] == "WARN"]
    assert (
        f"{paths} paths of the plan's cache file://{cache} not used: not signed by engine-cache-1"
        in " ".join(warned)
    ), warned


def test_a_nar_that_fails_to_substitute_is_built_instead_and_named(
    filled: tuple[Path, Path, str, int], tmp_path: Path
) -> None:
    """A NAR of the cache corrupted (signed, listed, but not what its hash says): nix's
    substitution of it fails, and with `fallback` on it goes on to build the arm rather than
    stop with "try --fallback" (which the fresh store cannot do). The build stage counts the
    failed substitution and WARNs naming the cache."""
    project, made, _, _ = filled
    cache = outside(project, "dist") / "cache"
    with moved(cache) as kept:
        shutil.copytree(kept, cache)
        for nar in cache.glob("nar/*"):
            data = bytearray(nar.read_bytes())
            data[len(data) // 2] ^= 0xFF
            nar.write_bytes(bytes(data))
        code, run_dir, out = run(project, fresh_store(tmp_path / "s"), "--run", made.name, *REBUILD)
    assert code != 0
    pinned = measured(run_dir, "pinned")
    url = f"file://{cache}"
    assert pinned["substitution"]["paths"] == {} and pinned["substitution"]["failed"].get(url, 0) >= 1
    assert not any("--fallback" in m for m in pinned["messages"]), pinned["messages"]
    warned = [f["message"] for f in result(run_dir)["findings"] if f["verdict"] == "WARN"]
    assert any(f"failed to substitute from the plan's cache {url}" in w for w in warned), warned


def test_a_run_narrowed_to_build_and_distribution_fills_the_cache_the_host_s_environment_names(
    filled: tuple[Path, Path, str, int], tmp_path: Path
) -> None:
    """The CI example's cache job: `--stage build --stage distribution`, with QUALIFY_CACHE and
    QUALIFY_CACHE_SECRET_KEY_FILE naming a cache and a key in the job's own folder (not the
    plan's paths), fills that cache and proves it; the run measured nothing of the engine, so it
    reads INCOMPLETE (exit 3), names the stages it left out, and keeps its narrowing when
    resumed; `--stage` naming others on the saved run is refused. A fresh host given the same
    environment substitutes every arm from that cache. Before: no option narrowed a run, and
    the cache and key were read only where the plan says (in a CI checkout, or nowhere)."""
    project, _, _, paths = filled
    (tmp_path / "job").mkdir()
    public = new_key(tmp_path / "job" / "cache-key.sec", "ci-cache-1")
    job = {
        "QUALIFY_CACHE": str(tmp_path / "job" / "cache"),
        "QUALIFY_CACHE_SECRET_KEY_FILE": str(tmp_path / "job" / "cache-key.sec"),
    }
    env = {**nix_env(), **job}
    narrowed = ("--stage", "build", "--stage", "distribution")
    code, run_dir, out = run(project, env, *AA, *narrowed)
    assert code == 3, out[-3000:]
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["options"] == {
        **saved["options"],
        "stages": ["build", "distribution"],
        "left_out": ["compile"],
    }
    assert saved["verdict"] == "INCOMPLETE" and "compile left out" in out, out[-2000:]
    url = f"file://{tmp_path / 'job' / 'cache'}"
    proof = json.loads((run_dir / "70-distribution" / "cache" / "result.json").read_text())
    assert proof["verdict"] == "PASS", proof
    filling = json.loads(
        (run_dir / "70-distribution" / "cache" / "candidate" / "measurement.json").read_text()
    )
    assert filling["filled_here"] and filling["signed_by"] == "ci-cache-1" and filling["paths"] == paths
    assert filling["cache"] == url and (tmp_path / "job" / "cache" / "nix-cache-info").is_file()
    encoded = (tmp_path / "job" / "cache-key.sec").read_text().strip().partition(":")[2]
    for path in run_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert encoded[:40].encode() not in path.read_bytes(), path

    code, again, out = run(project, env, "--run", run_dir.name, "--pinned", "cand")
    assert code == 3 and again == run_dir, out[-3000:]
    assert sorted(p.name for p in run_dir.glob("[0-9]*-*")) == ["10-build", "70-distribution"]
    code, _, out = run(project, env, "--run", run_dir.name, "--pinned", "cand", "--stage", "compile")
    assert code == 4 and "runs only build, distribution; --stage compile names others" in out, out[-2000:]

    code, host_run, out = run(project, {**fresh_store(tmp_path / "host"), **job}, *AA, "--stage", "build")
    assert code == 3 and "distribution left out" in out, out[-3000:]
    assert json.loads((host_run / "run.json").read_text())["options"]["left_out"] == [
        "compile",
        "distribution",
    ]
    (cache,) = caches(host_run)
    assert cache["used"] and cache["cache"] == url and cache["public_key"] == public, cache
    pinned = measured(host_run, "pinned")
    assert pinned["ok"] and pinned["built"] == [] and pinned["substitution"]["paths"] == {url: paths}


def test_the_ci_workflow_s_cache_job_fills_the_cache_from_the_secret_for_the_host_jobs(
    filled: tuple[Path, Path, str, int], tmp_path: Path
) -> None:
    """The CI example's cache job as GitHub's runner runs its shell steps (tests/helpers/
    actions_runner.py; the actions stood in for by what they leave: the project's folder, a
    python on PATH, a folder per artifact), on this module's project, dispatched for `cand`:
    the key written from the secret QUALIFY_CACHE_KEY into the job's temporary folder, a run
    narrowed to the build and distribution stages filling a cache there, the job passing on its
    binary-cache check, the cache kept as an artifact, the key removed. qualify is the suite's
    own: its install step is tested in tests/test_ci_workflow.py. Then a host job's steps before
    nix: the cache unpacked and QUALIFY_CACHE pointing at it, the key written for its own
    distribution stage. The secret is in no step's output and no file the jobs leave."""
    project, _, _, paths = filled
    secret = (outside(project, "dist") / "cache-key.sec").read_text().strip()
    artifacts = Artifacts(tmp_path / "artifacts")
    actions = {"actions/checkout": lambda call: None, "actions/setup-python": lambda call: None}
    actions |= artifacts.stand_ins()
    nix = Path(shutil.which("nix") or "nix").parent
    kept = ("HOME", "LANG", "NIX_CONFIG", "QUALIFY_COMMAND_USER")
    env = {k: v for k, v in os.environ.items() if k.startswith(kept)}
    env["PATH"] = f"{Path(sys.executable).parent}:{nix}:/usr/bin:/bin"
    contexts = {
        "github": {"event_name": "workflow_dispatch", "repository": "engine/llama", "workflow": "qualify"},
        "vars": {"QUALIFY_SOURCE": str(REPO)},
        "inputs": {"candidate": "cand", "profile": ""},
        "secrets": {"QUALIFY_CACHE_KEY": secret},
        "needs": {"hosts": {"result": "success", "outputs": {}}},
    }
    workflow = REPO / "examples" / "ci" / "github-actions.yml"
    job = JobRunner(
        workflow, "cache", contexts, workspace=project, temp=tmp_path / "cache-job", env=env, actions=actions
    )
    assert job.wanted()
    job.run(until="Install qualify")
    job.skip("Install qualify")
    job.run()
    assert job.status == "success", [(r.name, r.output[-3000:]) for r in job.runs]
    assert job.outputs() == {"filled": "true"}
    cache = tmp_path / "artifacts" / "qualify-cache"
    assert (cache / "nix-cache-info").is_file() and len(list(cache.glob("*.narinfo"))) == paths
    ran = json.loads((tmp_path / "artifacts" / "qualify-cache-runs" / "cache-run.json").read_text())
    assert ran["verdict"] == "INCOMPLETE" and ran["stages"]["distribution"] == "PASS", ran["stages"]
    assert not (tmp_path / "cache-job" / "qualify-key").exists()

    contexts["needs"]["cache"] = {"result": "success", "outputs": job.outputs()}
    host = JobRunner(
        workflow, "qualify", contexts, workspace=project, temp=tmp_path / "host-job", env=env, actions=actions
    )
    assert host.wanted()
    host.run(until="Nix")
    assert host.status == "success", [(r.name, r.output[-3000:]) for r in host.runs]
    assert host.env["QUALIFY_CACHE"] == str(tmp_path / "host-job" / "qualify-cache")
    assert (tmp_path / "host-job" / "qualify-cache" / "nix-cache-info").is_file()
    key = Path(host.env["QUALIFY_CACHE_SECRET_KEY_FILE"])
    assert key.read_text().strip() == secret and key.stat().st_mode & 0o777 == 0o600
    encoded = secret.partition(":")[2]
    assert all(encoded not in r.output for r in [*job.runs, *host.runs])
    for folder in (tmp_path / "cache-job", tmp_path / "artifacts", project):
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink() and path != key:
                assert encoded[:40].encode() not in path.read_bytes(), path
