"""Parsers for what nix prints, on samples of Nix 2.8 (seen here) and of current CppNix and
Lix."""

from __future__ import annotations

import json

from qualify.build.flakeinputs import direct_inputs
from qualify.build.internaljson import BuildLog, parse_dry_run
from qualify.build.nix import first_result, installable_ref, parse_flake_metadata

LOCKS = {
    "nodes": {
        "nixpkgs": {
            "locked": {
                "type": "github",
                "owner": "NixOS",
                "repo": "nixpkgs",
                "rev": "e8be78",
                "narHash": "sha256-A",
                "lastModified": 1787964612,
            },
            "original": {"type": "github", "owner": "NixOS", "repo": "nixpkgs", "ref": "nixpkgs-unstable"},
        },
        "helper": {
            "inputs": {"nixpkgs": ["nixpkgs"]},
            "locked": {"type": "path", "path": "/x", "narHash": "sha256-B"},
            "original": {"type": "path", "path": "/x"},
        },
        "root": {"inputs": {"nixpkgs": "nixpkgs", "helper": "helper", "pkgs2": ["helper", "nixpkgs"]}},
    },
    "root": "root",
    "version": 7,
}


def test_metadata_of_nix_2_8_clean_and_dirty() -> None:
    clean = parse_flake_metadata(
        ".",
        {
            "url": "git+file:///p?ref=main&rev=abc",
            "revision": "abc",
            "locked": {"type": "git"},
            "locks": LOCKS,
            "lastModified": 1,
        },
    )
    assert clean.dirty is False and clean.locked_url.endswith("rev=abc")
    dirty = parse_flake_metadata(".", {"url": "git+file:///p", "locked": {"type": "git"}, "locks": LOCKS})
    assert dirty.dirty is True and dirty.revision is None


def test_metadata_of_current_nix_and_lix_marks_dirty_revision() -> None:
    data = {
        "url": "git+file:///p",
        "dirtyRevision": "abc-dirty",
        "fingerprint": "f",
        "locked": {"type": "git", "dirtyRev": "abc-dirty"},
        "locks": LOCKS,
    }
    assert parse_flake_metadata(".", data).dirty is True


def test_metadata_of_a_path_flake_is_not_version_controlled() -> None:
    data = {"url": "path:/p?narHash=sha256-X", "locked": {"type": "path"}, "locks": LOCKS}
    source = parse_flake_metadata(".", data)
    assert source.dirty is None and source.locked_url == "path:/p?narHash=sha256-X"


def test_build_json_with_and_without_timing_fields() -> None:
    old = '[{"drvPath":"/nix/store/a-x.drv","outputs":{"out":"/nix/store/b-x"}}]'
    new = (
        '[{"drvPath":"/nix/store/a-x.drv","outputs":{"out":"/nix/store/b-x","dev":"/nix/store/c-x-dev"},'
        '"startTime":1700000000,"stopTime":1700000010,"cpuUser":3.5,"cpuSystem":0.5}]'
    )
    assert first_result(old) == ("/nix/store/a-x.drv", {"out": "/nix/store/b-x"})
    assert first_result(new)[1]["dev"] == "/nix/store/c-x-dev"


def ev(**fields: object) -> str:
    return "@nix " + json.dumps(fields)


def test_internal_json_build_events_with_unknown_types() -> None:
    log = BuildLog()
    lines = [
        (0.0, ev(action="start", id=1, type=104, level=0, text="")),
        (
            0.1,
            ev(
                action="start",
                id=2,
                type=105,
                level=3,
                text="building",
                fields=["/nix/store/h-a.drv", "", 1, 1],
            ),
        ),
        (0.2, ev(action="result", id=2, type=101, fields=["compiling kernel.hip"])),
        (0.3, ev(action="result", id=2, type=104, fields=["buildPhase"])),
        (0.4, ev(action="start", id=3, type=112, text="new activity type")),  # newer CppNix
        (0.5, ev(action="result", id=3, type=109, fields=[1, 2])),  # newer result type
        (1.0, ev(action="result", id=1, type=105, fields=[1, 1, 0, 0])),
        (2.5, ev(action="stop", id=2)),
        (2.6, "plain text a builder printed"),
        (2.7, "@nix {broken json"),
        (
            3.0,
            ev(
                action="msg",
                level=0,
                msg="\u001b[31;1merror:\u001b[0m builder for '/nix/store/h-a.drv' failed",
            ),
        ),
    ]
    for at, line in lines:
        log.feed(at, line)
    [build] = log.built()
    assert build.drv == "/nix/store/h-a.drv" and build.seconds == 2.4
    assert list(build.tail) == ["compiling kernel.hip"] and build.phase == "buildPhase"
    assert log.progress == (1, 1, 0, 0)
    assert log.messages[-1].startswith("error: builder for")


def test_a_derivation_started_twice_counts_once() -> None:
    log = BuildLog()
    for ident in (1, 2):
        log.feed(0, ev(action="start", id=ident, type=105, fields=["/nix/store/h-a.drv", "", 1, 1]))
    assert len(log.built()) == 1


def test_substitutions_and_the_substitutes_nix_would_not_trust_across_versions() -> None:
    """Nix 2.8's lines as seen here (`nix build` from a signed file:// cache and an unsigned
    one), and the wordings of current CppNix and Lix for a substitute not signed by a trusted
    key and for a daemon that ignores what an untrusted user gives it."""
    log = BuildLog()
    cache, other = "file:///tmp/c/cache", "https://other.example"
    lines = [
        ev(action="start", id=1, type=109, fields=["/nix/store/a-dep", cache], text="querying info"),
        ev(action="stop", id=1),
        ev(action="start", id=2, type=108, fields=["/nix/store/a-dep", cache], text=""),
        ev(action="start", id=3, type=100, fields=["/nix/store/a-dep", cache, "local"], text="copying path"),
        ev(action="stop", id=3),
        ev(action="stop", id=2),
        ev(action="start", id=4, type=108, fields=["/nix/store/b-top", cache], text=""),
        ev(
            action="msg",
            level=1,
            msg="\u001b[35;1mwarning:\u001b[0m the substitute for '/nix/store/c-x' from 'file:///tmp/c/unsigned' "
            "is not signed by any of the keys in 'trusted-public-keys'",
        ),
        ev(
            action="msg",
            level=1,
            msg=f"warning: ignoring substitute for '/nix/store/d-y' from '{other}', as it's not signed by any "
            "of the keys in 'trusted-public-keys'",
        ),
        ev(
            action="msg",
            level=1,
            msg=f"warning: ignoring untrusted substituter '{cache}', you are not a trusted user.",
        ),
        ev(
            action="msg",
            level=1,
            msg="warning: Ignoring the client-specified setting 'trusted-public-keys', because it is a "
            "restricted setting and you are not a trusted user",
        ),
        ev(
            action="msg",
            level=1,
            msg="warning: ignoring the user-specified setting 'fallback', because it is a restricted setting "
            "and you are not a trusted user",
        ),
    ]
    for line in lines:
        log.feed(0.0, line)
    assert log.substituting == {"/nix/store/a-dep": cache, "/nix/store/b-top": cache}
    assert log.untrusted == {"/nix/store/c-x": "file:///tmp/c/unsigned", "/nix/store/d-y": other}
    assert log.ignored == [
        f"ignoring untrusted substituter '{cache}', you are not a trusted user.",
        "Ignoring the client-specified setting 'trusted-public-keys', because it is a restricted setting "
        "and you are not a trusted user",
    ]
    assert log.built() == []


def test_dry_run_messages_across_versions() -> None:
    lines = [
        ev(action="msg", level=0, msg="these 2 derivations will be built:"),
        ev(action="msg", level=0, msg="  /nix/store/a-x.drv"),
        ev(action="msg", level=0, msg="  /nix/store/b-y.drv"),
        ev(
            action="msg",
            level=0,
            msg="these 3 paths will be fetched (10.50 MiB download, 52.10 MiB unpacked):",
        ),
        ev(action="msg", level=0, msg="  /nix/store/c-z"),
        ev(action="msg", level=0, msg="  /nix/store/d-w"),
        ev(action="msg", level=0, msg="  /nix/store/e-v"),
    ]
    plan = parse_dry_run(lines)
    assert plan.will_build == ("/nix/store/a-x.drv", "/nix/store/b-y.drv")
    assert len(plan.will_fetch) == 3 and "10.50 MiB download" in (plan.fetch_summary or "")
    single = parse_dry_run(
        [ev(action="msg", msg="this derivation will be built:"), ev(action="msg", msg="  /nix/store/a-x.drv")]
    )
    assert single.will_build == ("/nix/store/a-x.drv",)


def test_inputs_follow_paths_resolve_from_the_root() -> None:
    inputs = direct_inputs(LOCKS)
    assert inputs["nixpkgs"]["rev"] == "e8be78"
    assert inputs["nixpkgs"]["original"] == "github:NixOS/nixpkgs/nixpkgs-unstable"
    assert inputs["nixpkgs"]["lastModified"] == "2026-08-29T00:50:12+00:00"
    assert inputs["pkgs2"]["rev"] == "e8be78"  # follows helper/nixpkgs -> root nixpkgs
    assert inputs["helper"]["original"] == "path:/x"


def test_installables_resolve_against_the_locked_flake() -> None:
    source = parse_flake_metadata(
        ".", {"url": "git+file:///p?rev=abc", "revision": "abc", "locked": {"type": "git"}, "locks": {}}
    )
    assert installable_ref(source, ".#rocm10") == ("git+file:///p?rev=abc#rocm10", True)
    assert installable_ref(source, "legacyPackages.x86_64-linux.gfx1151.gufo") == (
        "git+file:///p?rev=abc#legacyPackages.x86_64-linux.gfx1151.gufo",
        True,
    )
    assert installable_ref(source, "github:o/r#x") == ("github:o/r#x", False)
