"""Whether nix runs a flake's builders apart from qualify's user (qualify/core/nixbuilders.py):
the rule on nix's settings as `nix show-config --json` prints them, then on this host's own nix,
whose answer a run records among what the host did not give."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from qualify.core.nixbuilders import builders_unprotected, judged


def settings(**values: object) -> dict[str, dict[str, object]]:
    """What `nix show-config --json` prints of each setting: its value among other fields."""
    return {name.replace("_", "-"): {"value": value, "aliases": []} for name, value in values.items()}


@pytest.mark.parametrize(
    ("values", "euid", "writable", "apart"),
    [
        # Debian's nix-bin as root with build-users-group emptied: builders are root.
        ({"store": "auto", "build_users_group": "", "sandbox": False}, 0, True, False),
        # Root with build users: each builder is a build user.
        ({"store": "auto", "build_users_group": "nixbld", "sandbox": True}, 0, True, True),
        # A user of a multi-user install: the store is the daemon's, and so are the builders.
        ({"store": "auto", "build_users_group": "nixbld", "sandbox": True}, 1000, False, True),
        ({"store": "daemon", "build_users_group": "", "sandbox": False}, 1000, True, True),
        ({"store": "unix:///nix/var/nix/daemon-socket/socket"}, 1000, True, True),
        # A single-user install: the user owns the store, builders run as that user.
        ({"store": "auto", "build_users_group": "", "sandbox": True}, 1000, True, False),
        ({"store": "local", "build_users_group": "nixbld", "sandbox": False}, 1000, True, False),
        # A chroot store under a folder, as root without build users.
        ({"store": "/tmp/store", "build_users_group": ""}, 0, True, False),
        # A remote store builds there.
        ({"store": "ssh-ng://builder", "build_users_group": ""}, 0, True, True),
    ],
)
def test_builders_are_apart_only_as_build_users_or_through_a_daemon(
    values: dict[str, object], euid: int, writable: bool, apart: bool
) -> None:
    said = judged(settings(**values), euid, writable)
    assert (said is None) == apart, said
    if said is not None:
        assert said.startswith("nix's builders apart from qualify's user (nix builds in this store as ")
        assert ("no sandbox" in said) == (values.get("sandbox") is not True)


@pytest.mark.nix
@pytest.mark.skipif(shutil.which("nix") is None, reason="nix is not installed")
def test_this_host_s_nix_is_read_as_it_resolves_its_settings() -> None:
    """The answer follows nix's own resolution (NIX_CONFIG included), read back here with the
    same command."""
    shown = json.loads(
        subprocess.run(["nix", "show-config", "--json"], capture_output=True, check=True).stdout
    )
    group = shown["build-users-group"]["value"]
    said = builders_unprotected()
    if os.geteuid() == 0 and shown["store"]["value"] == "auto":
        assert (said is None) == bool(group), (group, said)
    if said is not None:
        assert ", no sandbox" in said or shown["sandbox"]["value"] in (True, "relaxed")
