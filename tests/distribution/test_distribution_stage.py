"""The distribution stage on a real project (tests/distribution/distflakes.py): real nix, real git
repositories, `qualify run` as a process. Nothing stands in: the "fork" is a git repository on
this disk whose branch a test force-pushes and garbage-collects, the cache and the mirror are
folders nix writes and reads, the key is one nix made."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import qualify_proc
from distflakes import force_push_away, make_fork, make_project, new_key, outside
from nixflakes import have_nix

pytestmark = [pytest.mark.nix, pytest.mark.skipif(not have_nix(), reason="nix is not installed")]


def run(project: Path, env: dict[str, str], *args: str) -> tuple[int, Path, str]:
    done = qualify_proc("run", *args, "--project", str(project), env=env)
    runs = sorted((project / "runs").glob("*/run.json"), key=lambda p: p.stat().st_mtime)
    return done.returncode, runs[-1].parent if runs else project, done.stdout + done.stderr


def result(run_dir: Path, check: str) -> dict:
    return json.loads((run_dir / "70-distribution" / check / "result.json").read_text())


def measured(run_dir: Path, check: str) -> dict:
    return json.loads((run_dir / "70-distribution" / check / "candidate" / "measurement.json").read_text())


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int, str]:
    """The project, qualified once: (project, its run, exit code, output)."""
    from nixflakes import nix_env

    project = make_project(tmp_path_factory.mktemp("dist"))
    code, run_dir, out = run(project, nix_env(), "--candidate", "cand")
    return project, run_dir, code, out


def rerun(project: Path, env: dict[str, str]) -> tuple[Path, str]:
    code, run_dir, out = run(project, env, "--only", "distribution", "--force")
    assert code in (0, 1), out[-3000:]
    return run_dir, out


def test_a_qualified_candidate_has_its_sources_kept_its_cache_proved_and_its_patch(
    made: tuple[Path, Path, int, str],
) -> None:
    project, run_dir, code, out = made
    assert code == 0 and "QUALIFIED" in out, out[-3000:]
    dist = outside(project, "dist")
    sources = result(run_dir, "sources")
    assert sources["verdict"] == "PASS" and sources["facts"]["from_origin"] == 2, sources
    fork = next(p for p in measured(run_dir, "sources")["inputs"] if p["name"] == "fork")
    assert fork["mirror"]["archived"] and fork["mirror"]["nar_hash"] == fork["nar_hash"]
    assert (dist / "sources" / f"{Path(fork['store_path']).name.split('-')[0]}.narinfo").is_file()

    cache = measured(run_dir, "cache")
    assert result(run_dir, "cache")["verdict"] == "PASS"
    assert cache["substituted_paths"] == cache["paths"] >= 2 and cache["verify"]["ok"]
    assert cache["cache_bytes"] > 0 and cache["build"]["check"] == "build/arms" and cache["held_before"] == 0
    narinfos = list((dist / "cache").glob("*.narinfo"))
    assert len(narinfos) == cache["paths"]
    assert all("Sig: engine-cache-1:" in n.read_text() for n in narinfos)
    assert all(n.read_text().count("Compression: zstd") == 1 for n in narinfos)

    move = result(run_dir, "pin-move")
    assert move["verdict"] == "PASS", move
    patch = (run_dir / "70-distribution" / "pin-move" / "candidate" / "pin-move.patch").read_text()
    assert patch.startswith("From ") and "Subject: [PATCH] Move the pin to cand (.#candidate)" in patch
    assert "QUALIFIED before this stage" in patch and '+      default = engine (tool "2") "1";' in patch
    repo = project.parent  # the flake is the repository's folder engine/: the patch names engine/flake.nix
    assert "--- a/engine/flake.nix" in patch
    applies = subprocess.run(["git", "-C", str(repo), "apply", "--check", "-"], input=patch, text=True)
    assert applies.returncode == 0
    # After the patch the default is the candidate's very derivation (the check evaluated it).
    assert measured(run_dir, "pin-move")["default_drv"] == measured(run_dir, "pin-move")["candidate_drv"]


def test_the_signing_key_never_enters_a_record_a_log_or_the_cache(made: tuple[Path, Path, int, str]) -> None:
    project, run_dir, _, _ = made
    secret = (outside(project, "dist") / "cache-key.sec").read_text().strip()
    encoded = secret.partition(":")[2]
    for root in (run_dir, outside(project, "dist") / "cache", outside(project, "dist") / "sources"):
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                assert encoded.encode() not in data and encoded[:40].encode() not in data, path


def test_a_cache_a_host_cannot_trust_is_refused(
    made: tuple[Path, Path, int, str], nix_flakes: dict[str, str]
) -> None:
    """A NAR corrupted in the cache, a cache whose paths were copied there unsigned, and one
    signed by a key the plan no longer trusts: nix refuses each as the empty store substitutes,
    and the check FAILs saying which, never ERROR."""
    project, _, _, _ = made
    cache = outside(project, "dist") / "cache"
    nar = sorted(cache.glob("nar/*.nar.zst"))[0]
    data = bytearray(nar.read_bytes())
    data[len(data) // 2] ^= 0xFF
    nar.write_bytes(bytes(data))
    run_dir, out = rerun(project, nix_flakes)
    tampered = result(run_dir, "cache")
    assert tampered["verdict"] == "FAIL" and "does not match its hash" in tampered["reason"], tampered[
        "reason"
    ]

    shutil.rmtree(cache)
    out_path = json.loads((run_dir / "run.json").read_text())["roles"]["candidate"]["out"]
    unsigned = ["nix", "copy", "--to", f"file://{cache}", out_path]
    subprocess.run(unsigned, env=nix_flakes, check=True, capture_output=True)
    run_dir, out = rerun(project, nix_flakes)
    untrusted = result(run_dir, "cache")
    assert (
        untrusted["verdict"] == "FAIL" and "lacks a valid signature by engine-cache-1" in untrusted["reason"]
    )
    assert "NOT QUALIFIED" in out

    shutil.rmtree(cache)  # made again, signed, by the next run
    run_dir, _ = rerun(project, nix_flakes)
    assert result(run_dir, "cache")["verdict"] == "PASS"

    # The key replaced by a new one: the cache's paths are still signed by the old key, which the
    # new trust (its public half) does not cover.
    key = outside(project, "dist") / "cache-key.sec"
    kept = key.read_bytes()
    new_key(key, "engine-cache-2")
    run_dir, _ = rerun(project, nix_flakes)
    rotated = result(run_dir, "cache")
    assert rotated["verdict"] == "FAIL" and "lacks a valid signature by engine-cache-2" in rotated["reason"]
    assert measured(run_dir, "cache")["held_before"] == measured(run_dir, "cache")["paths"]
    key.write_bytes(kept)


def test_an_input_its_origin_lost_is_restored_from_the_mirror_else_named(
    made: tuple[Path, Path, int, str], nix_flakes: dict[str, str]
) -> None:
    """The fork's branch force-pushed and its old commit collected: the mirror restores the
    locked source (PASS); with the mirror emptied and this host's copy deleted, nothing holds it
    and the check FAILs naming the input."""
    project, _, _, _ = made
    dropped = force_push_away(outside(project, "fork"))
    run_dir, _ = rerun(project, nix_flakes)
    sources = result(run_dir, "sources")
    assert sources["verdict"] == "PASS" and sources["facts"]["from_mirror_only"] == 1, sources
    fork = next(p for p in measured(run_dir, "sources")["inputs"] if p["name"] == "fork")
    assert fork["rev"] == dropped and not fork["origin"]["ok"] and fork["mirror"]["held_before"]
    assert sources["tables"][0]["rows"][1][:2] == ["fork", "git"]

    shutil.rmtree(outside(project, "dist") / "sources")
    deleted = subprocess.run(
        ["nix", "store", "delete", fork["store_path"]], env=nix_flakes, capture_output=True, text=True
    )
    assert deleted.returncode == 0, deleted.stderr
    run_dir, _ = rerun(project, nix_flakes)
    lost = result(run_dir, "sources")
    assert lost["verdict"] == "FAIL" and lost["facts"]["lost"] == ["fork"], lost
    assert lost["reason"].startswith(
        f"input 'fork' (file://{outside(project, 'fork')} (main) at {dropped[:12]})"
    )
    assert "is gone from its origin" in lost["reason"]


#: The move of `broken`, the candidate that fails its compile stage: as a plain check, and as one
#: the plan allows to write its patch anyway.
MOVE = r"""sed -i 's/default = engine (tool \"1\") \"1\"/default = engine (tool \"3\") \"0\"/' flake.nix"""
UNQUALIFIED = f"""
name = "distribution"
[[check]]
kind = "binary-cache"
name = "cache"
cache = "{{dist}}/cache"
secret_key_file = "{{dist}}/cache-key.sec"
[[check]]
kind = "pin-move"
name = "pin-move"
run = "{MOVE}"
[[check]]
kind = "pin-move"
name = "pin-move-anyway"
run = "{MOVE}"
allow_unqualified = "the self-test is known to fail on this host"
"""


def test_the_pin_moves_only_after_the_stages_before_qualified(
    tmp_path: Path, nix_flakes: dict[str, str]
) -> None:
    """A candidate that fails its compile stage, run past the gate (--no-gate): no patch; with
    `allow_unqualified` the patch is written, WARN, and the report says so where a reviewer
    reads what the run does not prove. Then the signing key is gone: the next run is refused
    before anything is built."""
    project = make_project(tmp_path, UNQUALIFIED)
    code, run_dir, out = run(project, nix_flakes, "--candidate", "broken", "--no-gate")
    assert code == 1 and "NOT QUALIFIED" in out, out[-3000:]
    plain = result(run_dir, "pin-move")
    assert plain["verdict"] == "SKIPPED" and "compile FAIL" in plain["reason"], plain
    assert not (run_dir / "70-distribution" / "pin-move" / "candidate" / "pin-move.patch").exists()
    anyway = result(run_dir, "pin-move-anyway")
    assert anyway["verdict"] == "WARN" and "WRITTEN WITHOUT QUALIFICATION" in anyway["reason"], anyway
    patch = (run_dir / "70-distribution" / "pin-move-anyway" / "candidate" / "pin-move.patch").read_text()
    assert "WRITTEN WITHOUT QUALIFICATION (allow_unqualified): the self-test is known to fail" in patch
    report = json.loads((run_dir / "report.json").read_text())
    assert any("written although the stages before it are NOT QUALIFIED" in n for n in report["not_proven"])

    (outside(project, "dist") / "cache-key.sec").unlink()
    before = sorted((project / "runs").iterdir())
    code, _, out = run(project, nix_flakes, "--candidate", "broken")
    assert code == 4 and "70-distribution.toml: check 'cache': secret_key_file" in out, out[-2000:]
    assert "nix key generate-secret" in out and sorted((project / "runs").iterdir()) == before


def test_a_run_narrowed_to_build_and_distribution_keeps_the_cache_but_never_moves_the_pin(
    made: tuple[Path, Path, int, str],
) -> None:
    """The candidate that qualified the whole plan, run again with `--stage build --stage
    distribution`: its sources are kept and its cache proved, but the stages that measure the
    engine were left out, so the run is INCOMPLETE and the pin-move check is SKIPPED naming
    them: a narrowed run never writes the pin's patch."""
    from nixflakes import nix_env

    project, qualified, code, _ = made
    assert code == 0
    code, run_dir, out = run(
        project, nix_env(), "--candidate", "cand", "--stage", "build", "--stage", "distribution"
    )
    assert code == 3 and run_dir != qualified and "compile left out" in out, out[-3000:]
    assert result(run_dir, "cache")["verdict"] == "PASS" and result(run_dir, "sources")["verdict"] == "PASS"
    moved = result(run_dir, "pin-move")
    assert moved["verdict"] == "SKIPPED" and "compile left out (--stage)" in moved["reason"], moved
    assert not (run_dir / "70-distribution" / "pin-move" / "candidate" / "pin-move.patch").exists()


def test_without_a_command_the_move_locks_the_input_the_candidate_overrides(
    tmp_path: Path, nix_flakes: dict[str, str]
) -> None:
    """The candidate is pinned's installable with the fork input overridden (a toolchain pin
    moved as an input): the default move locks that override into flake.lock, after which the
    pinned arm is the candidate's derivation."""
    moved = make_fork(tmp_path / "fork-2", "fork-2")
    arms = f'[arms.moved]\ninstallable = ".#default"\nnix_args = ["--override-input", "fork", "git+file://{moved}?ref=main"]\n'
    only_the_move = 'name = "distribution"\n[[check]]\nkind = "pin-move"\nname = "pin-move"\n'
    project = make_project(tmp_path / "p", only_the_move, arms)
    code, run_dir, out = run(project, nix_flakes, "--candidate", "moved")
    assert code == 0, out[-3000:]
    move = result(run_dir, "pin-move")
    assert move["verdict"] == "PASS", move
    assert measured(run_dir, "pin-move")["files"] == ["engine/flake.lock"]
    patch = (run_dir / "70-distribution" / "pin-move" / "candidate" / "pin-move.patch").read_text()
    assert (
        f'+        "url": "file://{moved}"' in patch
        and "nix flake lock" in dict(move["tables"][0]["rows"])["move"]
    )


def test_doctor_says_whether_this_host_makes_and_reads_caches(nix_flakes: dict[str, str]) -> None:
    from qualify.distribution.hostcache import cache_round_trip

    ok, said = cache_round_trip(nix_flakes)
    assert ok and said.startswith("nix (Nix)") and "signed zstd file:// cache" in said, said


def test_a_key_file_that_is_no_key_is_named_never_quoted(tmp_path: Path, nix_flakes: dict[str, str]) -> None:
    from qualify.checks.binarycache import secret_key_problem

    good = tmp_path / "good.sec"
    public = new_key(good, "probe-1")
    assert secret_key_problem(good) is None and public.startswith("probe-1:")
    bad = tmp_path / "bad.sec"
    bad.write_text("hunter2-but-longer-than-a-word:notbase64!!\n")
    said = secret_key_problem(bad)
    assert (
        said is not None and str(bad) in said and "hunter2" not in said and "nix key generate-secret" in said
    )
    # A real key that other users may read: refused, naming the mode and what to do.
    good.chmod(0o644)
    said = secret_key_problem(good)
    assert said is not None and "mode 0644" in said and f"chmod 600 {good}" in said, said
    assert good.read_text().split(":")[1].strip()[:12] not in said
