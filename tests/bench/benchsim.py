"""Seeded simulations of bench units, and saved bench checks built from chosen values.

No engine runs here: the statistics and the judge only see numbers, so the tests give them
numbers built to prove each finding.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qualify.bench.judge import Series
from qualify.checks.base import SavedCheck
from qualify.core.checkspec import CheckSpec
from qualify.core.runstore import write_json

LLAMA_CONFIG = {"n_threads": 2, "type_k": "f16", "n_prompt": 64, "n_gen": 0, "n_depth": 0}


def simulate(
    rng: np.random.Generator,
    pairs: int,
    effect: float,
    cv: float,
    drift: float = 0.0,
    position: float = 0.0,
) -> Series:
    """Unit log-medians of one test in ABBA order: candidate = pinned × (1 + effect), lognormal
    noise of `cv`, a random-walk `drift` per unit and a `position` penalty on the second unit
    of each pair."""
    walk = np.cumsum(rng.normal(0, drift, 2 * pairs)) if drift else np.zeros(2 * pairs)
    values: list[tuple[float | None, float | None]] = []
    for i in range(pairs):
        first, second = ("pinned", "candidate") if i % 2 == 0 else ("candidate", "pinned")
        got = {}
        for slot, role in enumerate((first, second)):
            level = math.log(100.0) + walk[2 * i + slot] + rng.normal(0, cv)
            level += math.log(1 + effect) if role == "candidate" else 0.0
            level += math.log(1 - position) if slot == 1 else 0.0
            got[role] = level
        values.append((got["pinned"], got["candidate"]))
    return Series("pp64", "t/s", True, tuple(values))


def spec(limits: dict[str, float] | None = None, **params: Any) -> CheckSpec:
    base = {
        "run": "llama-bench",
        "format": "llama-bench",
        "alpha": 0.05,
        "looks": 2,
        "max_pairs": 16,
        "min_pairs": None,
        "budget_s": None,
        "warmup": True,
        "allow_config_diff": [],
    }
    return CheckSpec("llama-bench", "bench", {**base, **params}, dict(limits or {}), ("pinned", "candidate"))


def saved_check(
    folder: Path,
    tests: dict[str, Sequence[tuple[Sequence[float], Sequence[float]]]],
    *,
    looks: Sequence[int],
    limits: dict[str, float] | None = None,
    configs: dict[str, dict[str, Any]] | None = None,
    crash: tuple[str, int] | None = None,
    env_note: int | None = None,
    arms: tuple[str, str] = ("pinned", "clang19"),
    params: dict[str, Any] | None = None,
) -> SavedCheck:
    """A bench check folder as `measure` leaves it: `tests` maps a label to per-pair
    (pinned repetitions, candidate repetitions); `crash` = (role, pair) fails that unit;
    `env_note` marks the unit of that index with a co-tenant."""
    n_pairs = max(len(v) for v in tests.values())
    units: list[dict[str, Any]] = []
    rows: dict[str, list[dict[str, Any]]] = {"pinned": [], "candidate": []}
    for role in ("pinned", "candidate"):
        units.append({"index": len(units), "role": role, "phase": "warmup", "pair": None, "ok": True})
    for p in range(1, n_pairs + 1):
        order = ("pinned", "candidate") if p % 2 else ("candidate", "pinned")
        for role in order:
            index = len(units)
            ok = crash != (role, p)
            unit: dict[str, Any] = {
                "index": index,
                "role": role,
                "phase": "pair",
                "pair": p,
                "ok": ok,
                "outcome": "exit code 0" if ok else "killed by signal 11",
                "started_at": "2026-01-01T00:00:00+00:00",
                "duration_s": 1.0,
                "env_before": {"load": 0.1},
                "env_after": {"load": 0.1},
                "env_notes": ["GPU co-tenant after the unit: 4242:python"] if env_note == index else [],
            }
            units.append(unit)
            if not ok:
                break
            for label, per_pair in tests.items():
                if p > len(per_pair):
                    continue
                reps = per_pair[p - 1][0 if role == "pinned" else 1]
                for rep, value in enumerate(reps):
                    rows[role].append(
                        {
                            "unit": index,
                            "pair": p,
                            "test": label,
                            "rep": rep,
                            "value": value,
                            "ns": None,
                            "unit_name": "t/s",
                            "higher_is_better": True,
                        }
                    )
        if crash and crash[1] == p:
            break
    pairs = sum(1 for p in range(1, n_pairs + 1) if sum(u["pair"] == p and u["ok"] for u in units) == 2)
    plan = {
        "alpha": 0.05,
        "looks": list(looks),
        "tests": len(tests),
        "margin": 0.03,
        "computed_min_pairs": looks[0],
        "first_level": 0.025 / max(len(tests), 1),
    }
    write_json(
        folder / "schedule.json", {"plan": plan, "pairs": pairs, "stop_reason": "test", "units": units}
    )
    for role, arm in zip(("pinned", "candidate"), arms, strict=True):
        (folder / role).mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows[role]).to_parquet(folder / role / "samples.parquet", index=False)
        role_configs = (configs or {}).get(role, {label: LLAMA_CONFIG for label in tests})
        write_json(folder / role / "measurement.json", {"role": role, "arm": arm, "configs": role_configs})
    return SavedCheck(folder, spec(limits, **(params or {})), ("pinned", "candidate"))


def steady(pairs: int, pinned: float, candidate: float, jitter: float, seed: int = 0) -> list[Any]:
    """Per-pair repetitions around two throughputs with a relative `jitter`."""
    rng = np.random.default_rng(seed)
    return [
        (
            list(pinned * (1 + rng.normal(0, jitter, 3))),
            list(candidate * (1 + rng.normal(0, jitter, 3))),
        )
        for _ in range(pairs)
    ]


def result(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "result.json").read_text())
