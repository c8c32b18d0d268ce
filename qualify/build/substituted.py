"""What each role's build took from substituters instead of building it, and what the report
says of it: "substituted N paths from CACHE, built M derivations", per role.

Nix's log tells where a path's substitution began (`BuildLog.substituting`), not whether it
ended well: a path counts as substituted only when the store holds it after the build and no
derivation built it (`fallback` builds what a substituter failed to give). A path a substituter
held but nix did not trust, and a substituter or key a nix daemon ignored, come from nix's
warnings (`qualify.build.internaljson`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from qualify.build import nix
from qualify.build.internaljson import BuildLog
from qualify.checks.base import Finding
from qualify.checks.figures import Table
from qualify.core.verdicts import Verdict
from qualify.records.build import BuildMeasurement, PlanCache, Substitution

#: How a nix daemon is told to let this user add the plan's cache.
_DAEMON = (
    "a nix daemon takes substituters and keys only from a trusted user: add this user to "
    "trusted-users, or the cache to trusted-substituters and its key to trusted-public-keys, in "
    "the daemon's nix.conf"
)


def measured(log: BuildLog, env: Mapping[str, str]) -> Substitution:
    """What one `nix build` substituted, checked against the store once it ended."""
    began = log.substituting
    taken: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    if began:
        drvs = [b.drv for b in log.built()]
        built = nix.outputs(drvs, env) if drvs else set()
        missing = nix.invalid_paths(sorted(began), env)
        for path, uri in began.items():
            (failed if path in missing or path in built else taken)[uri] += 1
    return Substitution(
        paths=dict(taken),
        failed=dict(failed),
        untrusted=dict(Counter(log.untrusted.values())),
        ignored=list(dict.fromkeys(log.ignored)),
    )


def paths(n: int) -> str:
    return f"{n} path{'s' if n != 1 else ''}"


def said(m: BuildMeasurement) -> str:
    """Where a role's arm came from, in a line: "substituted N paths from X, built M derivations"."""
    built = sum(1 for b in m.built if b.seconds is not None and not b.failed)
    s = m.substitution or Substitution(paths={}, failed={}, untrusted={}, ignored=[])
    parts = [f"substituted {paths(n)} from {uri}" for uri, n in sorted(s.paths.items())]
    parts = parts or ["substituted nothing"]
    parts.append(f"built {built} derivation{'s' if built != 1 else ''}")
    parts += [f"{n} failed to substitute from {uri}" for uri, n in sorted(s.failed.items())]
    parts += [
        f"{n} held by {uri} not used (not signed by a trusted key)" for uri, n in sorted(s.untrusted.items())
    ]
    if m.shared_build_with:
        parts.append(f"shares {m.shared_build_with}'s build")
    return ", ".join(parts)


def table(builds: Mapping[str, BuildMeasurement | None], caches: Sequence[PlanCache]) -> Table | None:
    """Where each role's arm came from, and the plan's caches; None where no substituter gave
    or refused anything and the plan names no cache."""
    done = {role: m for role, m in builds.items() if m is not None}
    if not caches and not any(_touched(m.substitution) for m in done.values()):
        return None
    rows = [(role, said(m)) for role, m in done.items()]
    for cache in caches:
        trust = f"trusted by {cache.public_key.partition(':')[0]}" if cache.public_key else ""
        rows.append(
            (
                f"plan's cache ({cache.check})",
                f"{cache.cache}: " + (trust if cache.used else f"not used: {cache.why}"),
            )
        )
    return Table(title="Substituted or built", columns=("role", "where the arm came from"), rows=tuple(rows))


def _touched(s: Substitution | None) -> bool:
    return s is not None and bool(s.paths or s.failed or s.untrusted or s.ignored)


def findings(builds: Mapping[str, BuildMeasurement | None], caches: Sequence[PlanCache]) -> list[Finding]:
    """WARNs where the plan's cache was here and was meant to serve, and did not."""
    out = [
        Finding(Verdict.WARN, f"the plan's cache {c.cache} ({c.check}) was not used: {c.why}")
        for c in caches
        if c.present and not c.used and c.public_key is None
    ]
    used = {c.cache: c for c in caches if c.used}
    for role, m in builds.items():
        s = m.substitution if m is not None else None
        if s is None:
            continue
        for uri, n in sorted(s.untrusted.items()):
            if uri in used:
                key = (used[uri].public_key or "?").partition(":")[0]
                out.append(
                    Finding(
                        Verdict.WARN,
                        f"{paths(n)} of the plan's cache {uri} not used: not signed by {key}, the "
                        "key the plan trusts it by (unsigned, or signed by another key)",
                        role,
                    )
                )
        for uri, n in sorted(s.failed.items()):
            if uri in used:
                failed = f"{paths(n)} failed to substitute from the plan's cache {uri}"
                out.append(Finding(Verdict.WARN, failed, role))
        if s.ignored and used:
            out.append(
                Finding(Verdict.WARN, f"nix ignored the plan's cache: {s.ignored[0]} ({_DAEMON})", role)
            )
    return out


def from_plan(builds: Mapping[str, BuildMeasurement | None], caches: Sequence[PlanCache]) -> int:
    """The paths every role substituted from the plan's caches, together."""
    used = {c.cache for c in caches if c.used}
    return sum(
        n
        for m in builds.values()
        if m is not None and m.substitution is not None
        for uri, n in m.substitution.paths.items()
        if uri in used
    )
