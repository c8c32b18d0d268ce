"""The `binary-cache` kind's measure and judge (`qualify.distribution.kind` says what it proves).

The proof is a copy from the cache into an empty store with `require-sigs` on and the plan's
public key the only one trusted, given to that command alone, so no key the host trusts on its
own (nix.conf's `trusted-public-keys`) can vouch for a path. A copy builds nothing: a path the
cache lacks fails it. The secret key's contents are remembered as a secret before any command
runs, so that wherever nix or a child prints them they are redacted; only its path is passed on.
A host without the key file whose plan gives the public key (a fleet host) proves the cache it
was given, filled where the key is, and copies nothing into it.
"""

from __future__ import annotations

from pathlib import Path

from qualify.checks.base import CANDIDATE, Finding, Judgement, SavedCheck
from qualify.checks.binarycache import CacheParams, key_problem, proves_only
from qualify.checks.figures import Table
from qualify.checks.storefolders import PathProblem, resolved, store_url
from qualify.core.context import CheckContext
from qualify.core.errors import PlaceholderError, QualifyError
from qualify.core.redaction import remember
from qualify.core.verdicts import Verdict
from qualify.distribution.built import Built, built
from qualify.distribution.nixstore import Nix, folder_bytes, scratch
from qualify.records.distribution import BuildTime, CacheFacts, CacheMeasurement, Step, checked

_MIB = 1024 * 1024
#: Words of nix's errors, and what they say of the cache.
_UNTRUSTED = ("lacks a valid signature", "is not signed", "untrusted")
_CORRUPT = ("hash mismatch", "NAR", "decompress", "zstd", "xz", "bad archive", "truncated", "unexpected end")


def measure(ctx: CheckContext) -> None:
    params = CacheParams.of(ctx.spec).on_this_host()
    nix = Nix.of_check(ctx)
    ctx.role_dir(CANDIDATE)
    measurement = CacheMeasurement(closure=params.closure, compression=params.compression)
    try:
        measurement = _measure(ctx, params, nix)
    except (QualifyError, PathProblem, PlaceholderError) as exc:
        measurement = measurement.model_copy(update={"error": str(exc)})
    ctx.save(CANDIDATE, checked(measurement))


def _measure(ctx: CheckContext, params: CacheParams, nix: Nix) -> CacheMeasurement:
    record = built(ctx)
    values = ctx.values(CANDIDATE)
    cache = resolved(params.cache, values, ctx.config.root)
    key = resolved(params.secret_key_file, values, ctx.config.root)
    problem = key_problem(params, key)
    if problem is not None:
        raise QualifyError(problem)
    filling = not proves_only(params, key)
    signed_by: str | None = None
    if filling:
        secret = key.read_text(encoding="utf-8").strip()
        signed_by, _, encoded = secret.partition(":")
        remember([secret, encoded])  # before any command: never in clear in a log or record
    elif not (cache / "nix-cache-info").is_file():
        raise QualifyError(
            f"no binary cache at {cache} to prove, and secret_key_file {key} is not on this host "
            "to fill one: bring the cache here from the host that filled it, or the key"
        )
    if nix.version() is None:
        raise QualifyError("nix is not installed")
    trusted = params.public_key if params.public_key is not None else nix.public_key(key)
    outs = sorted(set(record.candidate.outputs.values()))
    paths = nix.requisites(outs, "closure")
    if params.closure == "build" and record.candidate.drv is not None:
        paths = sorted(
            set(paths) | set(nix.requisites([record.candidate.drv], "build-closure", include_outputs=True))
        )
    infos = nix.path_infos(paths, "path-info")
    held = sum(1 for path in paths if _narinfo(cache, path).is_file())
    if filling:
        cache.mkdir(parents=True, exist_ok=True)
        ctx.echo(f"candidate: {len(paths)} paths to {cache}")
        settings = {"compression": params.compression, "secret-key": str(key)}
        copied: Step | None = nix.copy(store_url(cache, **settings), paths, "copy")
    else:
        ctx.echo(f"candidate: no secret key here; proving the {held} of {len(paths)} paths {cache} holds")
        copied = None
    found = CacheMeasurement(
        cache=store_url(cache),
        signed_by=signed_by,
        public_key=trusted,
        closure=params.closure,
        compression=params.compression,
        paths=len(paths),
        held_before=held,
        nar_bytes=sum(int(info.get("narSize") or 0) for info in infos.values()),
        cache_bytes=sum(_cached_bytes(cache, path) for path in paths),
        cache_total_bytes=folder_bytes(cache),
        filled_here=filling,
        copied=copied,
        build=_build_time(record, store_url(cache)),
    )
    if copied is not None and not copied.ok:
        return found
    return found.model_copy(update=_proved(nix, cache, paths, trusted))


def _narinfo(cache: Path, path: str) -> Path:
    """Where a binary cache keeps what it says of a store path."""
    return cache / f"{Path(path).name.split('-', 1)[0]}.narinfo"


def _cached_bytes(cache: Path, path: str) -> int:
    """What the cache holds of `path`: its narinfo and the compressed NAR it names."""
    narinfo = _narinfo(cache, path)
    if not narinfo.is_file():
        return 0
    fields = dict(
        line.split(": ", 1) for line in narinfo.read_text(encoding="utf-8").splitlines() if ": " in line
    )
    size = fields.get("FileSize", "0")
    return narinfo.stat().st_size + (int(size) if size.isdigit() else 0)


def _proved(nix: Nix, cache: Path, paths: list[str], trusted: str) -> dict[str, object]:
    """Substitute `paths` from the cache alone into an empty store that trusts only `trusted`,
    then verify every path there."""
    with scratch("substitute") as folder:
        fresh = str(folder / "store")
        trust = {"require_sigs": "true", "trusted_public_keys": trusted}
        substitution = nix.copy(fresh, paths, "substitute", source=store_url(cache), **trust)
        if not substitution.ok:
            return {"substitution": substitution}
        present = nix.path_infos(paths, "substituted", store=fresh)
        argv = [
            "nix",
            "store",
            "verify",
            "--store",
            fresh,
            "--option",
            "trusted-public-keys",
            trusted,
            *paths,
        ]
        verify = nix.run(argv, "verify")[0]
    missing = sorted(set(paths) - set(present))
    return {
        "substitution": substitution,
        "substituted_paths": len(present),
        "missing": missing[:20],
        "verify": verify,
    }


def _build_time(record: Built, cache: str) -> BuildTime:
    build = record.builder()
    done = [b.seconds for b in build.built if b.seconds is not None and not b.failed]
    return BuildTime(
        check=record.name,
        seconds=build.seconds,
        derivations=len(done),
        derivation_seconds=round(sum(done), 3),
        substituted=build.substitution.paths.get(cache, 0) if build.substitution is not None else 0,
    )


def judge(saved: SavedCheck) -> Judgement:
    m = saved.measured(CANDIDATE, CacheMeasurement)
    if m is None:
        return Judgement(Verdict.ERROR, "the cache was not measured (the run stopped first)")
    if m.error is not None:
        return Judgement(Verdict.ERROR, m.error)
    if m.filled_here and (m.copied is None or not m.copied.ok):
        why = m.copied.error if m.copied else "not attempted"
        return Judgement(Verdict.ERROR, f"the copy into {m.cache} failed: {why}", tables=(_table(m),))
    facts = CacheFacts(
        cache=m.cache,
        public_key=m.public_key,
        paths=m.paths,
        cache_mib=round(m.cache_bytes / _MIB, 3),
        copy_s=m.copied.seconds if m.copied else None,
        substitution_s=m.substitution.seconds if m.substitution else None,
        build_s=_built_s(m),
    )
    finding = _failure(m)
    tables = (_table(m),)
    if finding is not None:
        return Judgement(Verdict.FAIL, finding.message, (finding,), tables, facts)
    trusted = (m.public_key or "").partition(":")[0]
    filled = (
        f"{m.paths} paths of the candidate's {m.closure} closure copied to {m.cache}, signed by {m.signed_by}"
        if m.filled_here
        else f"{m.cache} filled elsewhere (no secret key on this host): {m.held_before} of the "
        f"candidate's {m.paths} {m.closure} closure paths found there"
    )
    judged = (
        filled,
        f"substituted from the cache alone into an empty store trusting only {trusted}: "
        f"{m.substituted_paths} paths, none built",
        "every substituted path verified (NAR hash and signature)",
    )
    reason = (
        ("" if m.filled_here else "filled elsewhere, proved here: ")
        + f"{m.paths} paths, {m.cache_bytes / _MIB:.1f} MiB in the cache; substituted in "
        f"{facts.substitution_s:.2f} s" + (f" (built in {facts.build_s:.2f} s)" if facts.build_s else "")
    )
    return Judgement(Verdict.PASS, reason, (), tables, facts, judged=judged)


def _built_s(m: CacheMeasurement) -> float | None:
    """The build stage's time for the candidate, where it built anything in that run."""
    return m.build.derivation_seconds if m.build is not None and m.build.derivations else None


def _failure(m: CacheMeasurement) -> Finding | None:
    """Why the cache does not serve the arm to a host that trusts only the plan's key."""
    step = m.substitution
    trusted = (m.public_key or "?").partition(":")[0]
    if step is None or not step.ok:
        said = step.error if step else "not attempted"
        if any(word in (said or "") for word in _UNTRUSTED):
            what = (
                f"a path in the cache lacks a valid signature by {trusted}, the key the plan trusts "
                "(unsigned, or signed by another key: paths the cache already held are not signed again)"
            )
        elif any(word.lower() in (said or "").lower() for word in _CORRUPT):
            what = "a NAR in the cache does not match its hash (tampered with or corrupt)"
        else:
            what = "the arm could not be substituted from the cache"
        return Finding(Verdict.FAIL, f"{what} — nix: {said}", CANDIDATE)
    if m.missing:
        shown = ", ".join(m.missing[:3])
        return Finding(
            Verdict.FAIL, f"{len(m.missing)} closure paths missing from the fresh store ({shown})", CANDIDATE
        )
    if m.verify is None or not m.verify.ok:
        said = m.verify.error if m.verify else "not run"
        return Finding(Verdict.FAIL, f"the substituted copy failed verification — nix: {said}", CANDIDATE)
    return None


def _came_from(build: BuildTime) -> str:
    """Where the arm came from when the build stage built nothing for it."""
    if build.substituted:
        return f"{build.substituted} paths substituted from this cache"
    return "the arm was in the store"


def _table(m: CacheMeasurement) -> Table:
    def seconds(step: Step | None) -> str:
        return "" if step is None else f"{step.seconds:.2f}" + ("" if step.ok else " (failed)")

    build = m.build
    rows: list[list[str | int | float | None]] = [
        ["closure", f"{m.closure}: {m.paths} paths, {m.nar_bytes / _MIB:.1f} MiB of NARs"],
        [
            "in the cache",
            f"{m.cache_bytes / _MIB:.1f} MiB ({m.compression}); "
            f"the folder {m.cache_total_bytes / _MIB:.1f} MiB",
        ],
        [
            "copy to the cache (s)",
            seconds(m.copied)
            + (f" ({m.held_before} of {m.paths} paths held already)" if m.held_before else "")
            if m.filled_here
            else f"none: filled elsewhere, no secret key here ({m.held_before} of {m.paths} paths there)",
        ],
        ["substitution into an empty store (s)", seconds(m.substitution)],
        ["verification (s)", seconds(m.verify)],
    ]
    if build is not None:
        said = (
            f"{build.derivation_seconds:.2f} ({build.derivations} derivations; nix build {build.seconds:.2f})"
            if build.derivations
            else f"nothing built in this run ({_came_from(build)}; nix build {build.seconds:.2f})"
        )
        rows.append([f"build ({build.check}) (s)", said])
    shown = tuple(tuple(r) for r in rows)
    return Table(title=f"Binary cache {m.cache}", columns=("figure", "value"), rows=shown)
