"""Whether this host can make and read the distribution stage's caches (`qualify doctor`): the
whole round trip on a file of its own, in a folder of its own, never this host's store — a
throwaway key made and its public half derived, the file added to an empty store, copied to a
`file://` cache compressed with zstd and signed, then copied back into another empty store that
trusts only that key."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from qualify.checks.storefolders import store_url
from qualify.core import process
from qualify.core.process import capture
from qualify.distribution.nixstore import scratch


def cache_round_trip(env: Mapping[str, str]) -> tuple[bool, str]:
    """(whether it worked, what was found or what failed, in words)."""
    code, version = capture(["nix", "--version"], env=env, timeout_s=60)
    if code != 0:
        return False, "nix is not installed"
    with scratch("doctor") as folder:
        code, secret = capture(["nix", "key", "generate-secret", "--key-name", "qualify-doctor-1"], env=env)
        if code != 0:
            return False, f"{version.strip()}: `nix key generate-secret` failed: {secret.strip()[-200:]}"
        key = folder / "probe.sec"
        key.write_text(secret, encoding="utf-8")
        key.chmod(0o600)
        code, public = _public(env, key)
        if code != 0:
            return (
                False,
                f"{version.strip()}: `nix key convert-secret-to-public` failed: {public.strip()[-200:]}",
            )
        (folder / "probe").write_text("qualify doctor\n", encoding="utf-8")
        code, path = capture(
            ["nix", "store", "add-file", "--store", str(folder / "a"), str(folder / "probe")], env=env
        )
        if code != 0:
            return (
                False,
                f"{version.strip()}: `nix store add-file` into an empty store failed: {path.strip()[-200:]}",
            )
        signed = store_url(folder / "cache", compression="zstd", **{"secret-key": str(key)})
        trust = ["--option", "require-sigs", "true", "--option", "trusted-public-keys", public.strip()]
        steps = [
            ("a signed zstd cache", ["nix", "copy", "--from", str(folder / "a"), "--to", signed]),
            (
                "substituting from it",
                ["nix", "copy", "--from", store_url(folder / "cache"), "--to", str(folder / "b"), *trust],
            ),
        ]
        for what, argv in steps:
            code, said = capture([*argv, path.strip()], env=env, timeout_s=120)
            if code != 0:
                return False, f"{version.strip()}: {what} failed: {said.strip()[-200:]}"
    return True, f"{version.strip()}: nix key, a signed zstd file:// cache and substitution from it work"


def _public(env: Mapping[str, str], key: Path) -> tuple[int, str]:
    """The public half of the key file `key`, given on stdin."""
    with key.open("rb") as given:
        done = process.run(
            ["nix", "key", "convert-secret-to-public"],
            log=None,
            env=dict(env),
            stdin=given,
            timeout_s=60,
            separate_stdout=True,
        )
    return (0, done.stdout or "") if done.ok else (done.returncode or 1, "\n".join(done.output_tail))
