"""The distribution stage's kinds: `flake-inputs`, `binary-cache` and `pin-move`.

The pin moves only once the stages before it qualified the candidate, its sources can still be
fetched, and its closure can be substituted from a signed cache: these three checks, on the
candidate role alone, read what the build stage recorded (its source.json, the candidate's
measurement) through `CheckContext.earlier`.

`flake-inputs` — Measures: the candidate's flake as the build locked it (the project's own
source, and every input of its lock, nested locks included, with the candidate's
`--override-input`s applied), each fetched from its origin alone into an empty store (an empty
fetcher cache, no substituter), and, where the plan names a `mirror` (a binary cache of sources),
copied there (from this host's store, or from the origin just fetched) and restored from it
alone into another empty store, its NAR hash compared with the lock's.
Verdict:
- FAIL: an input its origin no longer serves at the locked revision and no mirror holds (named,
  with nix's words); an input the lock does not pin (no NAR hash).
- ERROR: nix is missing, the build stage left no record of the candidate's flake, or the flake
  could not be resolved.
- WARN: the flake's own source is a dirty tree (no revision to keep); an input could not be put
  in, or restored from, the mirror although its origin still serves it.
- PASS otherwise (an input its origin lost but the mirror restored passes: the table says so).
What it cannot prove: that an origin which serves an input today will tomorrow (only a mirror
keeps it); an origin that is unreachable from this host reads as lost.

`binary-cache` — Measures: the candidate's closure (runtime, or with `closure = "build"` its
build-time closure too) copied to the plan's `cache` with `nix copy`, compressed (zstd by
default) and signed with `secret_key_file` (its contents are registered as a secret: never in a
record, a log or a report); then an empty store substitutes the arm from that cache alone with
`require-sigs` on and only `public_key` trusted (a copy from a cache builds nothing: a path the
cache lacks fails, it is never built), and `nix store verify` checks every path's NAR hash and
signature there. On a host without the secret key (the file is missing) whose plan gives
`public_key`, as a fleet host's does, the cache filled where the key is is proved the same way
and not filled: the report says it was filled elsewhere. Recorded: the cache's size for the arm,
the copy's and the substitution's times, and the build stage's time for the candidate to
compare them with.
Verdict:
- FAIL: the cache does not serve the arm to a host that trusts only the plan's key: a path
  unsigned or signed by a key the plan does not trust, a NAR that does not match its hash
  (tampered or corrupt), a path missing (on a host that only proves the cache: one the host
  that filled it did not put there), or the fresh store's copy failing verification.
- ERROR: nix is missing, the key file cannot be read as a nix secret key (or is missing and the
  plan gives no `public_key`), the build left no store path for the candidate, the copy into the
  cache failed (the disk, the folder), or a host that only proves the cache finds none there.
- PASS otherwise.
What it cannot prove: that the hosts which will substitute from the cache can reach it, or
trust its key; that the cache stays served.

`pin-move` — Measures: the stages before it as the run's files say now; when they qualify the
candidate (or the plan says `allow_unqualified = "why"`), the change that makes the candidate
the default, made in a clean clone of the run's revision: the plan's `run` command there, or by
default `nix flake lock` with the candidate's `--override-input`s; written as `pin-move.patch`
(`git format-patch`: the qualification summary its message), then the pinned arm's installable
evaluated in the patched clone and compared with the candidate's derivation.
Verdict:
- SKIPPED: a stage before it did not qualify (and the plan allows nothing else), or the
  candidate is the pinned arm (an A/A run has no pin to move).
- ERROR: the move could not be made: the command failed, changed nothing, or nothing says how
  to move the pin (no `run`, no overridden input); the project is not a git checkout.
- WARN: the patch was written although the stages before did not qualify (`allow_unqualified`,
  shown in the report's limits of evidence); after the patch the pinned installable evaluates to
  another derivation than the candidate's (one that takes the flake's own source changes with it).
- PASS: the patch written, and after it the pinned installable is the candidate's derivation.
What it cannot prove: that the patch applies to a branch that moved since the run's revision.
"""

from __future__ import annotations

from qualify.checks.base import CANDIDATE, CheckKind
from qualify.checks.binarycache import KIND as CACHE_KIND
from qualify.checks.binarycache import CacheParams, key_bytes, key_problem
from qualify.checks.storefolders import PathProblem, preflight_path
from qualify.core.checkspec import CheckSpec
from qualify.core.config import ProjectConfig
from qualify.core.placeholders import stray_brace
from qualify.distribution.params import InputsParams, PinMoveParams

#: `closure` values: what of the arm the cache must hold.
CLOSURES = ("runtime", "build")
#: `compression` values nix's binary caches write on every version qualify supports.
COMPRESSIONS = ("zstd", "xz", "none")


def _inputs_preflight(spec: CheckSpec, config: ProjectConfig) -> str | None:
    try:
        preflight_path(InputsParams.of(spec).mirror, config)
    except PathProblem as exc:
        return f"mirror: {exc}"
    return None


def _cache_preflight(spec: CheckSpec, config: ProjectConfig) -> str | None:
    params = CacheParams.of(spec).on_this_host()
    try:
        preflight_path(params.cache, config)
        key = preflight_path(params.secret_key_file, config)
    except PathProblem as exc:
        return str(exc)
    return None if key is None else key_problem(params, key)


def _cache_invalid(spec: CheckSpec) -> str | None:
    params = CacheParams.of(spec)
    if params.closure not in CLOSURES:
        return f"closure {params.closure!r} is not one of {', '.join(CLOSURES)}"
    if params.compression not in COMPRESSIONS:
        return f"compression {params.compression!r} is not one of {', '.join(COMPRESSIONS)}"
    if params.public_key is not None and not key_bytes(params.public_key, 32):
        return "public_key is not a nix public key (name:base64, from nix key convert-secret-to-public)"
    return None


def _pin_move_invalid(spec: CheckSpec) -> str | None:
    run = PinMoveParams.of(spec).run
    if run is not None and stray_brace(run):
        return f"run {run!r} holds a brace that is no placeholder: write {{{{ or }}}} for a literal brace"
    return None


INPUTS = CheckKind(
    name="flake-inputs",
    summary="every locked input of the candidate's flake fetchable from its origin or a mirror",
    params=InputsParams.declared(),
    verdict_rules=(
        "FAIL when an input is gone from its origin at the locked revision and no mirror holds it, "
        "or is not locked; ERROR when nix, the build's record or the flake stops the check; WARN "
        "for a dirty tree or an input the mirror could not keep; PASS otherwise"
    ),
    default_roles=(CANDIDATE,),
    limits=(),
    preflight=_inputs_preflight,
)

CACHE = CheckKind(
    name=CACHE_KIND,
    summary=(
        "the candidate's closure in a signed binary cache, substituted from it into an empty store "
        "(a host without the secret key proves the cache it was given)"
    ),
    params=CacheParams.declared(),
    verdict_rules=(
        "FAIL when an empty store that trusts only the plan's key cannot substitute the arm from the "
        "cache (unsigned or untrusted paths, a tampered NAR, a missing path) or its copy fails "
        "verification; ERROR when nix, the key file (missing with no public_key), the build's store "
        "path or the copy stops the check, or a host without the key has no cache to prove; PASS otherwise"
    ),
    default_roles=(CANDIDATE,),
    limits=(),
    invalid=_cache_invalid,
    preflight=_cache_preflight,
)

PIN_MOVE = CheckKind(
    name="pin-move",
    summary="the patch that makes the candidate the default, written once the stages before qualified",
    params=PinMoveParams.declared(),
    verdict_rules=(
        "SKIPPED when a stage before did not qualify or the candidate is the pinned arm; ERROR when "
        "the move cannot be made; WARN when written by allow_unqualified, or when the pinned "
        "installable is not the candidate's derivation after it; PASS otherwise"
    ),
    default_roles=(CANDIDATE,),
    limits=(),
    invalid=_pin_move_invalid,
)
