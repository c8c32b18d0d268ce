"""A bisect's saved state read back (`qualify.bisect.state`): every field checked, a wrong one
refused naming the file and the key, and a resumed bisect held to the series, mode and context
it was started with."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qualify.bisect.outcomes import Outcome
from qualify.bisect.search import MIN_STEPS
from qualify.bisect.state import BisectState, Mode, ProbeRecord, as_json
from qualify.core.errors import RunStoreError, UsageError
from qualify.core.plaintext import visible
from qualify.core.runstore import read_json
from qualify.core.tomlfile import suggest
from qualify.pipeline.recordfields import type_name

HINT = "the file was changed after qualify wrote it; remove it to start the bisect over"
_OUTCOMES = tuple(o.value for o in Outcome)
_MODES = tuple(m.value for m in Mode)


def open_state(
    path: Path,
    series: Sequence[str],
    *,
    mode: Mode,
    retries: int,
    context: Mapping[str, Any] | None = None,
) -> BisectState:
    """The state at `path`: resumed when the file exists, else started there.

    A resumed state must be of the same series, mode and context: probes of another search
    would answer the wrong question. The retries given apply from now on, so a resume may
    measure undecided steps further.
    """
    if not path.exists():
        return BisectState.create(path, series, mode=mode, retries=retries, context=context)
    state = load(path)
    asked = {"series": list(series), "mode": mode.value, "context": as_json(context or {})}
    saved = {"series": list(state.series), "mode": state.mode.value, "context": dict(state.context)}
    for key, value in asked.items():
        if value != saved[key]:
            raise UsageError(
                f"{path} holds a bisect of another {key}: saved {json.dumps(saved[key])}, "
                f"asked {json.dumps(value)}",
                f"resume it with the {key} it was started with, or remove the file to start over",
            )
    if retries < 0:
        raise UsageError(f"retries is 0 or more, not {retries}")
    state.retries = retries
    return state


def load(path: Path) -> BisectState:
    """The state saved at `path`."""
    document = read_json(path)
    mode = document.get("mode")
    if mode not in _MODES:
        raise _wrong(path, "mode", mode, "one of " + ", ".join(_MODES))
    series = _series(path, document.get("series"))
    retries = document.get("retries")
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise _wrong(path, "retries", retries, "a whole number, 0 or more")
    context = document.get("context", {})
    if not isinstance(context, dict):
        raise _wrong(path, "context", context, "an object")
    probes = document.get("probes")
    if not isinstance(probes, list):
        raise _wrong(path, "probes", probes, "a list")
    records: list[ProbeRecord] = []
    for number, probe in enumerate(probes):
        records.append(_probe(path, f"probes[{number}]", probe, series, records))
    return BisectState(path, series, Mode(mode), retries, context, records)


def _series(path: Path, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) < MIN_STEPS:
        raise _wrong(path, "series", value, f"a list of at least {MIN_STEPS} step names")
    for number, name in enumerate(value):
        if not isinstance(name, str) or not name.strip():
            raise _wrong(path, f"series[{number}]", name, "a step's name")
        if value.index(name) != number:
            raise RunStoreError(f'{path}: series[{number}] "{visible(name)}" is named twice', HINT)
    return tuple(value)


def _probe(
    path: Path, key: str, probe: Any, series: tuple[str, ...], earlier: list[ProbeRecord]
) -> ProbeRecord:
    if not isinstance(probe, dict):
        raise _wrong(path, key, probe, "an object")
    name = probe.get("step")
    if not isinstance(name, str):
        raise _wrong(path, f"{key}.step", name, "a step's name")
    if name not in series:
        raise RunStoreError(
            f'{path}: {key}.step "{visible(name)}" is no step of the series{suggest(name, series)}', HINT
        )
    step = series.index(name)
    attempt = probe.get("attempt")
    expected = 1 + sum(1 for p in earlier if p.step == step)
    if attempt != expected or isinstance(attempt, bool):
        raise _wrong(path, f"{key}.attempt", attempt, f"{expected}, the step's next attempt")
    outcome = probe.get("outcome")
    if outcome is not None and outcome not in _OUTCOMES:
        raise _wrong(path, f"{key}.outcome", outcome, "null or one of " + ", ".join(_OUTCOMES))
    started, finished = probe.get("started"), probe.get("finished")
    if not isinstance(started, str):
        raise _wrong(path, f"{key}.started", started, "a time")
    if (finished is None) != (outcome is None) or not isinstance(finished, str | None):
        raise _wrong(path, f"{key}.finished", finished, "a time when the probe has an outcome, else null")
    evidence = probe.get("evidence", {})
    if not isinstance(evidence, dict):
        raise _wrong(path, f"{key}.evidence", evidence, "an object")
    return ProbeRecord(
        step, attempt, started, None if outcome is None else Outcome(outcome), finished, evidence
    )


def _wrong(path: Path, key: str, value: Any, expected: str) -> RunStoreError:
    shown = (
        repr(value)
        if isinstance(value, str | int | float) and not isinstance(value, bool)
        else type_name(value)
    )
    return RunStoreError(f"{path}: {key} is {shown}, not {expected}", HINT)
