"""The `kld` kind's parameters, declared once (`qualify.checks.kindparams`): the plan's names,
types, defaults, ranges and help, and the typed value `measure` and `judge` read them through."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.kindparams import KindParams, param
from qualify.core.ranges import NON_NEGATIVE, POSITIVE, Range, at_least

DEFAULT_CACHE = "{run_dir}/../.cache/kld"


@dataclass(frozen=True)
class NumericsParams(KindParams):
    """A `kld` check's parameters."""

    run: str = param(help="the scoring command; it leaves an artifact at `artifact`")
    artifact: str = param("{out_file}", help="where the command leaves its log-prob artifact")
    keep: bool = param(False, help="keep every role's artifact (default: only the reference's)")
    stream: bool = param(
        False,
        help="score pinned, pinned.2 and the candidate at once into named pipes reduced as they "
        "are written (llama.cpp _logits_ output): only the reference is stored",
    )
    floor_rerun: bool = param(True, help="score pinned twice (pinned.2) for the noise floor")
    cache: str = param(DEFAULT_CACHE, help='the reference cache\'s folder ("" turns caching off)')
    artifact_bytes: int | None = param(
        None, help="one artifact's size, checked before the first run", allowed=POSITIVE
    )
    min_chunks: int = param(
        48,
        help="fewer scored chunks is INCONCLUSIVE: below 48 the 95 % bound on a mean of "
        "heavy-tailed chunks covers less than 95 %; the first look is here",
        allowed=at_least(2),
    )
    looks: int = param(
        4,
        help="planned looks at most: at min_chunks, twice it, … and the corpus' end; the "
        "judgement (and with `stream`, the scoring) stops at the first that decides, each "
        "look's BCa bounds at 1 − α/K for the K looks planned, its Cantelli guard at 1 − α stretched by "
        "√(N/n), or on a large corpus (the last look eight times the first) a fifth of α set apart "
        "for the first look (qualify.numerics.looks)",
        allowed=at_least(1),
    )
    resamples: int = param(10_000, help="bootstrap resamples", allowed=at_least(100))
    seed: int = param(0, help="bootstrap seed", allowed=NON_NEGATIVE)
    confidence: float = param(
        0.95,
        help="one-sided confidence of every bound (below 0.5 a bound falls short of its estimate)",
        allowed=Range(0.5, 1, high_included=False),
    )
    flip_margin: float = param(
        0.1, help="reference top-1/top-2 gap (nats) making a flip confident", allowed=NON_NEGATIVE
    )
