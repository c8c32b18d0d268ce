"""Nix's distributed builds: the settings a run passes to every `nix build`, and a probe of
each remote builder before anything is built.

The build stage rides on nix's own remote builders rather than scheduling hosts itself: the
plan's `builders` and `builders_use_substitutes` and the command line's `--nix-option
NAME=VALUE` become `--option NAME VALUE` on every nix call of every arm (with `max_jobs = 0`
nix builds nothing locally). The internal-json log then names, for each derivation, the
machine that built it (`qualify.build.internaljson.DerivationBuild.machine`).

A builder that is down or refuses the key would show only as nix's "Failed to find a machine
for remote build!" after the evaluation; so each builder is asked first with
`nix store ping --store URI`, bounded in time, and one that does not answer is an ERROR naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from qualify.build.params import BuildParams
from qualify.core.errors import QualifyError
from qualify.core.process import capture

#: Seconds one builder may take to answer `nix store ping` (ssh's own connect timeout is
#: often two minutes: set ConnectTimeout in NIX_SSHOPTS or ~/.ssh/config to fail sooner).
PROBE_TIMEOUT_S = 60.0


def settings(params: BuildParams, cli: Sequence[Sequence[str]]) -> dict[str, str]:
    """The nix settings of a run: the plan's, then the command line's (which win)."""
    out: dict[str, str] = {}
    if params.builders:
        out["builders"] = params.builders
    if params.builders_use_substitutes is not None:
        out["builders-use-substitutes"] = "true" if params.builders_use_substitutes else "false"
    for name, value in cli:
        out[str(name)] = str(value)
    return out


def option_args(nix_settings: Mapping[str, str]) -> list[str]:
    return [arg for name, value in nix_settings.items() for arg in ("--option", name, value)]


def builder_uris(spec: str) -> list[str]:
    """The store URIs of nix's `builders` setting: entries split by `;` or newlines, the URI
    first in each; `@FILE` reads more entries from a machines file."""
    uris: list[str] = []
    for raw in spec.replace("\n", ";").split(";"):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        if entry.startswith("@"):
            path = Path(entry[1:])
            try:
                uris += builder_uris(path.read_text(encoding="utf-8", errors="replace"))
            except OSError as exc:
                raise QualifyError(
                    f"builders: machines file {path} cannot be read ({exc.strerror})",
                    "give the file's path after @, or the builders themselves",
                ) from None
            continue
        uris.append(entry.split()[0])
    return uris


def probe(uris: Sequence[str], env: Mapping[str, str], timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise a QualifyError naming the first builder that does not answer."""
    for uri in uris:
        if uri in ("auto", "local", "daemon"):
            continue
        code, text = capture(
            ["nix", "store", "ping", "--store", uri], env=env, timeout_s=timeout_s, privileged=True
        )
        if code != 0:
            tail = " ".join(line.strip() for line in text.strip().splitlines()[-3:])
            raise QualifyError(
                f"remote builder {uri} did not answer `nix store ping`: {tail or f'exit code {code}'}",
                "check that it is up, reachable, and accepts this user's ssh key (NIX_SSHOPTS and "
                "~/.ssh/config apply), or leave it out of builders",
            )
