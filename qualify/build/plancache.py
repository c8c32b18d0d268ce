"""Fleet hosts use the cache: the arms substituted from the plan's binary cache, not rebuilt.

A plan whose distribution stage has a `binary-cache` check names the cache that stage fills with
the candidate's closure, and the key it signs it with. The build stage reads that check from the
plan as resolved (`CheckContext.plan`): where this host has the cache and knows its public key,
every nix call of the arms (the dry run and the build) gets

    --option extra-substituters file://CACHE --option extra-trusted-public-keys KEY
    --option require-sigs true --option fallback true

so that nix substitutes whatever the cache holds signed by that key and builds the rest.
`require-sigs` stays on whatever nix.conf says: an unsigned path, or one signed by another key,
is not used (nix warns, and the build's record counts it). `fallback`: a NAR that fails to
substitute (corrupt, truncated) is built instead, so a broken cache never reads as a broken arm.

The public key is the check's `public_key`, else the public half of its `secret_key_file` where
that file is on this host (`nix key convert-secret-to-public`, the file on stdin, its contents
remembered as a secret first, so that they are redacted wherever they would be printed; only the
public half is recorded). A fleet host has the cache but not the secret: there the plan's
`public_key` is what lets it trust the cache, and without it the cache is not used (a WARN).

The cache changes where the arms come from, never what they are: the same store paths, so the
build's inputs, and every later stage's, are the same whether an arm was built or substituted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from qualify.build.params import BuildParams
from qualify.checks.base import CANDIDATE
from qualify.checks.binarycache import KIND, CacheParams, key_bytes, secret_key_problem
from qualify.checks.storefolders import PathProblem, resolved, store_url
from qualify.core import process
from qualify.core.context import CheckContext, PlannedCheck
from qualify.core.errors import PlaceholderError
from qualify.core.placeholders import Value
from qualify.core.redaction import remember
from qualify.core.runstore import write_json
from qualify.records.build import PlanCache, PlanCaches

#: Where the build check keeps what it found of the plan's caches.
CACHES = "caches.json"


def plan_caches(ctx: CheckContext, params: BuildParams, env: Mapping[str, str]) -> list[PlanCache]:
    """The plan's binary caches as this host has them (saved as caches.json), each used or not."""
    caches: list[PlanCache] = []
    for planned in ctx.plan:
        if planned.spec.kind != KIND:
            continue
        found = _found(ctx, planned, env)
        if found.used and any(c.used and c.cache == found.cache for c in caches):
            found = found.model_copy(update={"used": False, "why": "another check names the same cache"})
        if found.used and not params.plan_cache:
            found = found.model_copy(update={"used": False, "why": "the build check says plan_cache = false"})
        caches.append(found)
    if caches:
        write_json(ctx.folder / CACHES, PlanCaches(caches=caches).to_json())
    for cache in caches:
        said = f"trusted by {_key_name(cache.public_key)}" if cache.used else f"not used: {cache.why}"
        ctx.echo(f"binary cache {cache.cache} ({cache.check}): {said}")
    return caches


def cache_args(caches: Sequence[PlanCache]) -> list[str]:
    """nix's options for substituting from the caches used (none: no option at all)."""
    args: list[str] = []
    for cache in caches:
        if cache.used and cache.public_key is not None:
            args += ["--option", "extra-substituters", cache.cache]
            args += ["--option", "extra-trusted-public-keys", cache.public_key]
    return [*args, "--option", "require-sigs", "true", "--option", "fallback", "true"] if args else []


def _key_name(public_key: str | None) -> str:
    return (public_key or "?").partition(":")[0]


def _found(ctx: CheckContext, planned: PlannedCheck, env: Mapping[str, str]) -> PlanCache:
    """One check's cache: where it is, whether it is here, and the key it is trusted by."""
    params = CacheParams.of(planned.spec).on_this_host()
    name = f"{planned.stage}/{planned.spec.name}"

    def unused(cache: str, present: bool, why: str | None) -> PlanCache:
        return PlanCache(
            check=name, cache=cache, present=present, public_key=None, key_from=None, used=False, why=why
        )

    # Its placeholders filled as the check itself fills them: its variables, the candidate arm's.
    role = CANDIDATE if CANDIDATE in ctx.arms else ctx.roles[0]
    values = dataclasses.replace(ctx, spec=planned.spec).values(role)
    try:
        folder = resolved(params.cache, values, ctx.config.root)
    except (PathProblem, PlaceholderError) as exc:
        return unused(params.cache, False, f"the build cannot read it: {exc}")
    url = store_url(folder)
    if not (folder / "nix-cache-info").is_file():
        return unused(url, False, f"no cache at {folder} on this host (the distribution stage makes it)")
    if params.public_key is not None:
        return PlanCache(
            check=name,
            cache=url,
            present=True,
            public_key=params.public_key,
            key_from="public_key",
            used=True,
            why=None,
        )
    public, not_known = _public_half(params.secret_key_file, values, ctx, env)
    if public is None:
        return unused(url, True, not_known)
    return PlanCache(
        check=name,
        cache=url,
        present=True,
        public_key=public,
        key_from="secret_key_file",
        used=True,
        why=None,
    )


def _public_half(
    value: str, values: Mapping[str, Value], ctx: CheckContext, env: Mapping[str, str]
) -> tuple[str | None, str | None]:
    """(the public half of the secret key file `value` names, None) or (None, why not)."""
    missing = (
        "the check gives no public_key, and {problem}: a host without the secret key trusts the "
        "cache by the check's public_key (the output of nix key convert-secret-to-public < FILE)"
    )
    try:
        key = resolved(value, values, ctx.config.root)
    except (PathProblem, PlaceholderError) as exc:
        return None, missing.format(problem=f"its secret_key_file cannot be read here ({exc})")
    problem = secret_key_problem(key)
    if problem is not None:
        return None, missing.format(problem=problem.partition(";")[0])
    secret = key.read_text(encoding="utf-8").strip()
    remember([secret, secret.partition(":")[2]])  # before any command: never in clear anywhere
    with key.open("rb") as given:
        done = process.run(
            ["nix", "key", "convert-secret-to-public"],
            log=ctx.folder / "logs" / "cache-public-key.log",
            env=env,
            stdin=given,
            timeout_s=60,
            separate_stdout=True,
            privileged=True,
        )
    public = (done.stdout or "").strip()
    if not done.ok or not key_bytes(public, 32):
        said = " ".join(done.output_tail[-2:]) or done.describe()
        return None, f"`nix key convert-secret-to-public` of {key} failed: {said}"
    return public, None
