"""The `flake-inputs` kind's measure and judge (`qualify.distribution.kind` says what it proves).

Each input is fetched from its origin into an empty store with an empty fetcher cache and no
substituter, so a revision that is only still on this host (in its store, in nix's git cache)
does not pass for one its origin serves. The mirror is a binary cache of the inputs' sources:
they are content-addressed store paths, so a host restores them from it without a signature,
and nix itself substitutes a locked input from any substituter that holds it before it asks the
origin — a project shares the mirror by adding it to its hosts' `substituters`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from qualify.checks.base import CANDIDATE, Finding, Judgement, SavedCheck
from qualify.checks.figures import Table
from qualify.checks.findings import headline, worst
from qualify.checks.storefolders import PathProblem, resolved, store_url
from qualify.core.context import CheckContext
from qualify.core.errors import PlaceholderError, QualifyError
from qualify.core.recordredaction import redact_ref
from qualify.core.verdicts import Verdict
from qualify.distribution.built import built, candidate_overrides
from qualify.distribution.nixstore import Nix, scratch
from qualify.distribution.params import InputsParams
from qualify.records.distribution import (
    InputProbe,
    InputsFacts,
    InputsMeasurement,
    MirrorState,
    Step,
    checked,
)

#: The name the flake's own source goes by among its inputs.
SELF = "self"


def measure(ctx: CheckContext) -> None:
    params = InputsParams.of(ctx.spec)
    nix = Nix.of_check(ctx)
    ctx.role_dir(CANDIDATE)
    try:
        measurement = _measure(ctx, params, nix)
    except (QualifyError, PathProblem, PlaceholderError) as exc:
        measurement = InputsMeasurement(error=str(exc))
    ctx.save(CANDIDATE, checked(measurement))


def _measure(ctx: CheckContext, params: InputsParams, nix: Nix) -> InputsMeasurement:
    record = built(ctx)
    mirror = None
    if params.mirror is not None:
        mirror = resolved(params.mirror, ctx.values(CANDIDATE), ctx.config.root)
        mirror.mkdir(parents=True, exist_ok=True)
    if nix.version() is None:
        raise QualifyError("nix is not installed")
    candidate = record.candidate
    flake = record.source.locked_url if candidate.from_project_flake else candidate.ref.partition("#")[0]
    overrides = candidate_overrides(ctx)
    argv = ["nix", "flake", "metadata", "--json", flake]
    argv += [arg for name, ref in overrides for arg in ("--override-input", name, ref)]
    meta = json.loads(nix.query(argv, "metadata"))
    dirty = "revision" not in meta and meta.get("locked", {}).get("type") == "git"
    probes = []
    for name, node, locked in _inputs(meta):
        ctx.echo(f"candidate: input {name}")
        skip = name == SELF and dirty
        probes.append(_probe(nix, name, node, locked, mirror, skip_origin=skip))
    return InputsMeasurement(
        flake=redact_ref(flake),
        overrides=[[n, redact_ref(r) or ""] for n, r in overrides],
        mirror=None if mirror is None else str(mirror),
        dirty=dirty,
        inputs=probes,
    )


def _inputs(meta: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(name, node, locked attributes) of the flake's own source, then of each node of its lock
    reached from the root, named by the first path that reaches it (`fork/nixpkgs`)."""
    yield SELF, "root", meta.get("locked") or {}
    locks = meta.get("locks") or {}
    nodes: Mapping[str, Any] = locks.get("nodes") or {}
    queue = [("", str(locks.get("root", "root")))]
    seen = {queue[0][1]}
    while queue:
        prefix, key = queue.pop(0)
        for name, target in sorted((nodes.get(key) or {}).get("inputs", {}).items()):
            if not isinstance(target, str) or target in seen:
                continue  # a `follows` names a node reached by its own path
            seen.add(target)
            path = f"{prefix}{name}"
            yield path, target, (nodes.get(target) or {}).get("locked") or {}
            queue.append((f"{path}/", target))


def _probe(
    nix: Nix, name: str, node: str, locked: Mapping[str, Any], mirror: Path | None, *, skip_origin: bool
) -> InputProbe:
    nar_hash = locked.get("narHash")
    rev = locked.get("rev")
    probe = InputProbe(
        name=name,
        node=node,
        type=str(locked.get("type", "")),
        source=describe(locked),
        rev=rev if isinstance(rev, str) else None,
        nar_hash=nar_hash if isinstance(nar_hash, str) else None,
        store_path=None,
        origin=None,
        mirror=None,
    )
    if not isinstance(nar_hash, str) or skip_origin:
        return probe
    log = name.replace("/", ".")
    with scratch("origin") as folder:
        origin, made = nix.fetch_tree(fetchable(locked), folder, f"{log}-origin")
        store_path = made if origin.ok and made else _fixed(nix, locked, nar_hash)
        kept = None
        if mirror is not None and store_path is not None:
            fetched = str(folder / "store") if origin.ok else None
            kept = _mirrored(nix, store_path, nar_hash, mirror, fetched, log)
    return probe.model_copy(update={"store_path": store_path, "origin": origin, "mirror": kept})


def _fixed(nix: Nix, locked: Mapping[str, Any], nar_hash: str) -> str | None:
    """The input's store path from its NAR hash; None for a `file` input, whose path is made
    from the file's flat hash, which the lock does not hold."""
    if locked.get("type") == "file":
        return None
    try:
        return nix.fixed_path(nar_hash)
    except QualifyError:
        return None


def _mirrored(nix: Nix, path: str, nar_hash: str, mirror: Path, fetched: str | None, log: str) -> MirrorState:
    """The input kept in the mirror (copied from this host's store or from the origin's fetch
    when the mirror lacks it), then restored from the mirror alone into an empty store."""
    held = (mirror / f"{Path(path).name.split('-', 1)[0]}.narinfo").is_file()
    archived, archive_error = False, None
    if not held:
        here = nix.valid(path, f"{log}-here")
        source = None if here else fetched
        if not here and fetched is None:
            archive_error = "neither this host's store nor its origin has it"
        else:
            step = nix.copy(store_url(mirror, compression="zstd"), [path], f"{log}-archive", source=source)
            archived, archive_error = step.ok, step.error
    with scratch("mirror") as folder:
        restored = nix.copy(str(folder / "store"), [path], f"{log}-restore", source=store_url(mirror))
        got = None
        if restored.ok:
            got = (
                nix.path_infos([path], f"{log}-restored", store=str(folder / "store"))
                .get(path, {})
                .get("narHash")
            )
            if got != nar_hash:
                why = f"the restored copy's NAR hash {got} is not the lock's {nar_hash}"
                restored = Step(ok=False, seconds=restored.seconds, error=why)
    return MirrorState(
        held_before=held, archived=archived, archive_error=archive_error, restored=restored, nar_hash=got
    )


def fetchable(locked: Mapping[str, Any]) -> dict[str, Any]:
    """A lock's attributes as the fetcher takes them: `dir` (the flake's folder inside the source,
    in the attributes and in a URL's query) is the flake's, not the fetcher's, and the source is
    the whole tree either way."""
    attrs = {k: v for k, v in locked.items() if k != "dir"}
    url = attrs.get("url")
    if isinstance(url, str) and "?" in url:
        base, _, query = url.partition("?")
        kept = [part for part in query.split("&") if part and not part.startswith("dir=")]
        attrs["url"] = base + (f"?{'&'.join(kept)}" if kept else "")
    return attrs


def describe(locked: Mapping[str, Any]) -> str:
    """Where a locked input comes from, as a reader names it (its URL, owner/repo, path)."""
    kind = str(locked.get("type", ""))
    if kind in ("github", "gitlab", "sourcehut"):
        where = f"{kind}:{locked.get('owner')}/{locked.get('repo')}"
    else:
        where = str(locked.get("url") or locked.get("path") or kind)
    ref = locked.get("ref")
    return redact_ref(f"{where} ({ref})" if ref else where) or where


def judge(saved: SavedCheck) -> Judgement:
    m = saved.measured(CANDIDATE, InputsMeasurement)
    if m is None:
        return Judgement(Verdict.ERROR, "the inputs were not measured (the run stopped first)")
    if m.error is not None:
        return Judgement(Verdict.ERROR, m.error)
    findings: list[Finding] = []
    judged: list[str] = []
    lost: list[str] = []
    for probe in m.inputs:
        finding, said = _judged(probe, m)
        findings += [finding] if finding else []
        judged += [said] if said else []
        if finding is not None and finding.verdict is Verdict.FAIL:
            lost.append(probe.name)
    origin = sum(1 for p in m.inputs if p.origin is not None and p.origin.ok)
    mirror_only = sum(
        1
        for p in m.inputs
        if not (p.origin and p.origin.ok) and p.mirror is not None and p.mirror.restored.ok
    )
    facts = InputsFacts(
        mirror=m.mirror, inputs=len(m.inputs), from_origin=origin, from_mirror_only=mirror_only, lost=lost
    )
    verdict = worst(findings)
    kept = f", {mirror_only} restored from the mirror alone" if mirror_only else ""
    ok = f"{len(m.inputs)} sources of the candidate's flake: {origin} fetched from their origin{kept}"
    return Judgement(
        verdict, headline(verdict, findings, ok), tuple(findings), (_table(m),), facts, judged=tuple(judged)
    )


def _judged(p: InputProbe, m: InputsMeasurement) -> tuple[Finding | None, str | None]:
    """The finding an input makes (None: nothing to say) and what was judged of it."""
    where = f"input {p.name!r} ({p.source}" + (f" at {p.rev[:12]})" if p.rev else ")")
    if p.nar_hash is None:
        return Finding(Verdict.FAIL, f"{where} is not locked: the lock holds no NAR hash to keep"), None
    if p.origin is None:
        return Finding(
            Verdict.WARN, f"{where}: the flake's own tree had uncommitted changes: no revision to keep"
        ), None
    restored = p.mirror is not None and p.mirror.restored.ok
    if p.origin.ok:
        said = f"{p.name}: fetched from its origin" + (", restored from the mirror" if restored else "")
        if p.mirror is not None and not restored:
            why = p.mirror.archive_error or p.mirror.restored.error
            return Finding(Verdict.WARN, f"{where} could not be kept in the mirror: {why}"), said
        return None, said
    if restored:
        return None, f"{p.name}: its origin no longer serves it; restored from the mirror {m.mirror}"
    if p.mirror is None:
        mirror = "no mirror is named (the plan's `mirror`)"
    else:
        mirror = (
            f"the mirror {m.mirror} does not hold it ({p.mirror.archive_error or p.mirror.restored.error})"
        )
    return Finding(Verdict.FAIL, f"{where} is gone from its origin ({p.origin.error}), and {mirror}"), None


def _table(m: InputsMeasurement) -> Table:
    rows = []
    for p in m.inputs:
        origin = "not tried" if p.origin is None else ("fetched" if p.origin.ok else "LOST")
        if p.mirror is None:
            mirror = "no mirror"
        elif p.mirror.restored.ok:
            mirror = "restored" + (" (copied now)" if p.mirror.archived else " (held before)")
        else:
            mirror = "NOT HELD"
        rows.append(
            [p.name, p.type, p.source, (p.rev or "")[:12] or (p.nar_hash or "unlocked"), origin, mirror]
        )
    title = "Sources of the candidate's flake" + (f" (mirror {m.mirror})" if m.mirror else "")
    columns = ("input", "type", "from", "locked", "origin", "mirror")
    return Table(title=title, columns=columns, rows=tuple(tuple(r) for r in rows))
