"""How many repetitions a bench unit keeps, read from the plan, and the plan errors that follow.

A unit's coefficient of variation (the `max_unit_cv` limit) needs at least two repetitions left
after `discard_reps`; with fewer there is nothing to vary and the limit could never fire. The
count is known before anything runs when the check drives llama-bench: its `-r`/`--repetitions`
option (a number, or a `{name}` of the check's vars), 5 when absent (llama-bench's default).
For a `metrics` command, or a count left to an arm's vars, it is known only from the saved
samples, and the judge refuses the limit there instead.
"""

from __future__ import annotations

import re
from typing import Any

from qualify.bench.params import GATES, BenchParams
from qualify.core.checkspec import CheckSpec
from qualify.core.errors import PlaceholderError
from qualify.core.placeholders import split

#: llama-bench's repetitions when `-r` is not given.
LLAMA_BENCH_REPETITIONS = 5
MIN_REPETITIONS_FOR_CV = 2
_PLACEHOLDER = re.compile(r"^\{(\w+)\}$")


def _count(token: str, variables: dict[str, Any]) -> int | None:
    match = _PLACEHOLDER.match(token)
    value: Any = variables.get(match.group(1)) if match else token
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def planned_repetitions(params: BenchParams, variables: dict[str, Any]) -> int | None:
    """Repetitions per unit the plan asks llama-bench for (its `-r` a number or one of the
    check's `variables`), or None when the plan cannot say."""
    if params.format != "llama-bench":
        return None
    try:
        words = split(params.run)  # shlex's rules in linear time: a plan may hold megabytes of a word
    except PlaceholderError:
        return None
    for i, word in enumerate(words):
        if word in ("-r", "--repetitions"):
            # llama-bench takes a comma-free integer here; anything else is left to it to refuse.
            return _count(words[i + 1], variables) if i + 1 < len(words) else None
        if word.startswith("--repetitions="):
            return _count(word.split("=", 1)[1], variables)
    return LLAMA_BENCH_REPETITIONS


def invalid_plan(params: BenchParams, spec: CheckSpec) -> str | None:
    """What is wrong with a bench check's plan (`params` its parameters) before anything runs,
    or None."""
    discard = params.discard_reps
    if params.gate not in GATES:
        return f"gate = {params.gate!r}: use " + " or ".join(f'"{g}"' for g in GATES)
    if params.together and params.format != "metrics":
        # llama-bench and a server time themselves by the wall clock: run together on one CPU,
        # each would count the slices the others ran in against its own throughput.
        return (
            f'together = true is for format "metrics" (an engine timing itself with its thread\'s '
            f'CPU time), not "{params.format}", which times by the wall clock: drop together'
        )
    if params.format == "llama-server":
        if "{port}" not in params.run:
            return 'format "llama-server" starts a server per role: put {port} in run (--port {port})'
        rounds = params.rounds
        if "max_unit_cv" in spec.limits and rounds - discard < MIN_REPETITIONS_FOR_CV:
            return (
                f"limits.max_unit_cv needs at least {MIN_REPETITIONS_FOR_CV} rounds per block after "
                f"discard_reps, but the plan keeps {max(rounds - discard, 0)}: raise rounds or drop "
                "max_unit_cv"
            )
    if discard < 0:
        return f"discard_reps = {discard}: give 0 or more repetitions to leave out"
    reps = planned_repetitions(params, spec.vars)
    if "max_unit_cv" in spec.limits and reps is not None and reps - discard < MIN_REPETITIONS_FOR_CV:
        return (
            f"limits.max_unit_cv needs at least {MIN_REPETITIONS_FOR_CV} repetitions per unit after "
            f"discard_reps, but the run keeps {max(reps - discard, 0)} ({reps} with -r, {discard} "
            "discarded): raise llama-bench's -r, lower discard_reps, or drop max_unit_cv"
        )
    return None
