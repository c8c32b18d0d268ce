"""A bisect's saved state read back (`qualify.bisect.state`) through its type (`BisectFile`):
every field checked, a wrong one refused naming the file and the key, and a resumed bisect
held to the series, mode and context it was started with."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qualify.bisect.state import BisectState, ProbeRecord, as_json
from qualify.checks.evidence import HINT as EVIDENCE_HINT
from qualify.core.errors import RunStoreError, UsageError
from qualify.core.plaintext import visible
from qualify.core.runstore import read_json
from qualify.core.tomlfile import suggest
from qualify.records.bisect import BisectFile, Mode, SavedProbe

HINT = "the file was changed after qualify wrote it; remove it to start the bisect over"


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
    return state_of(read_file(path), path)


def read_file(path: Path) -> BisectFile:
    """bisect.json as its type: every field checked, a wrong one named with the file and key."""
    document = read_json(path)
    try:
        return BisectFile.load(document, path)
    except RunStoreError as exc:
        # A file of a newer qualify keeps its own advice; anything else was changed by hand.
        raise RunStoreError(exc.message, HINT if exc.hint == EVIDENCE_HINT else exc.hint) from None


def state_of(saved: BisectFile, path: Path) -> BisectState:
    """The state in memory: each probe's step by its place in the series, and what one field
    alone cannot tell checked (a step named twice, a probe of no step, attempts out of order,
    a finished probe without an outcome)."""
    series = tuple(saved.series)
    for number, name in enumerate(series):
        if not name.strip():
            raise _wrong(path, f"series[{number}]", name, "a step's name")
        if series.index(name) != number:
            raise RunStoreError(f'{path}: series[{number}]: "{visible(name)}" is named twice', HINT)
    records: list[ProbeRecord] = []
    for number, probe in enumerate(saved.probes):
        records.append(_probe(path, f"probes[{number}]", probe, series, records))
    return BisectState(path, series, saved.mode, saved.retries, saved.context, records)


def _probe(
    path: Path, key: str, probe: SavedProbe, series: tuple[str, ...], earlier: list[ProbeRecord]
) -> ProbeRecord:
    if probe.step not in series:
        close = suggest(probe.step, series)
        raise RunStoreError(
            f'{path}: {key}.step: "{visible(probe.step)}" is no step of the series{close}', HINT
        )
    step = series.index(probe.step)
    expected = 1 + sum(1 for p in earlier if p.step == step)
    if probe.attempt != expected:
        raise _wrong(path, f"{key}.attempt", probe.attempt, f"{expected}, the step's next attempt")
    if (probe.finished is None) != (probe.outcome is None):
        raise _wrong(
            path, f"{key}.finished", probe.finished, "a time when the probe has an outcome, else null"
        )
    return ProbeRecord(step, probe.attempt, probe.started, probe.outcome, probe.finished, probe.evidence)


def _wrong(path: Path, key: str, value: str | int | None, expected: str) -> RunStoreError:
    return RunStoreError(f"{path}: {key}: {'null' if value is None else repr(value)}, not {expected}", HINT)
