"""The bench's results table says what its pair noise and its interval are, so the two cannot
be read as contradicting each other: the noise is the SD of one pair's log ratio, the interval
the confidence interval of R from every pair at 1 − level, and for normal pairs its width
follows from the noise and the number of pairs the table shows.

The pairs are built from chosen log ratios (`benchsim.saved_check`): pinned runs at 100, the
candidate at 100·exp(d) for each pair's d.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from statistics import NormalDist

import numpy as np
from benchsim import saved_check

from qualify.bench import check as bench
from qualify.checks.base import Judgement
from qualify.checks.figures import Table


def judged(folder: Path, ratios: Sequence[float]) -> Judgement:
    pairs = [([100.0] * 3, [100.0 * math.exp(d)] * 3) for d in ratios]
    return bench.judge(saved_check(folder, {"tps": pairs}, looks=[len(ratios)]))


def figures(table: Table) -> dict[str, float]:
    """The row of test tps as a reader takes it: the noise, the pairs, the level, the interval."""
    columns = list(table.columns)
    row = dict(zip(columns, table.rows[0], strict=True))
    (noise,) = [c for c in columns if "noise" in c]
    (interval,) = [c for c in columns if "CI" in c]
    low, high = (float(v) for v in str(row[interval]).split(", "))
    return {
        "sd": float(str(row[noise]).rstrip("%")) / 100,
        "pairs": float(str(row["pairs"]).split()[0]),
        "level": float(str(row["level"])),
        "low": low,
        "high": high,
    }


def implied(sd: float, pairs: float, level: float) -> float:
    """The half-width on the log scale that normal pairs of this SD give the Hodges–Lehmann
    interval: z · SD · √(π / 3n)."""
    return NormalDist().inv_cdf(1 - level / 2) * sd * math.sqrt(math.pi / (3 * pairs))


def test_the_table_names_each_statistic_and_its_figures_agree_for_normal_pairs(tmp_path: Path) -> None:
    """Before, the table showed "pair noise ±2.0 %" beside "interval on R": a "±" that reads as
    a range of R, and no word of which spread each is, so a reader took one for the other."""
    ratios = np.random.default_rng(11).normal(0.0, 0.02, 40)
    table = judged(tmp_path, ratios).tables[0]
    noise = next(c for c in table.columns if "noise" in c)
    interval = next(c for c in table.columns if "CI" in c)
    assert "SD of one pair" in noise and "1 − level" in interval
    assert "spread of one pair, not of R" in table.title and "z·SD·√(π/3n)" in table.title
    assert "±" not in str(table.rows[0][table.columns.index(noise)])
    seen = figures(table)
    # The figures shown are the statistics named: the pairs' robust SD, and an interval whose
    # half-width on the log scale is what that SD gives n normal pairs, within the sampling
    # error of a robust SD (1st–99th percentile 0.81–1.48 over simulated sets of 40 pairs).
    assert seen["pairs"] == len(ratios)
    assert abs(seen["sd"] - 0.02) < 0.006
    half = (math.log(seen["high"]) - math.log(seen["low"])) / 2
    assert 0.75 < half / implied(seen["sd"], seen["pairs"], seen["level"]) < 1.5


def test_an_interval_wider_than_the_noise_implies_is_explained(tmp_path: Path) -> None:
    """Twelve pairs, most within ±3 % and four far out (−10 %, −12 %, +20 %, +22 %): the robust
    SD describes the typical pair, the interval every pair, and a note says how many times
    wider the interval is, from the figures the table shows. Before, the table showed a pair
    noise of ±3.34 % beside an interval of 0.9489, 1.1052 and nothing reconciled them."""
    ratios = [-0.03, -0.02, -0.012, -0.005, 0.0, 0.006, 0.014, 0.03, -0.1, -0.12, 0.2, 0.22]
    judgement = judged(tmp_path, ratios)
    seen = figures(judgement.tables[0])
    half = (math.log(seen["high"]) - math.log(seen["low"])) / 2
    times = half / implied(seen["sd"], seen["pairs"], seen["level"])
    assert times > 3
    notes = [n for n in judgement.facts.limits_of_evidence if "times as wide as its pair noise" in n]
    assert len(notes) == 1, judgement.facts.limits_of_evidence
    said = re.search(r"is ([0-9.]+) times as wide", notes[0])
    assert said is not None and abs(float(said.group(1)) - times) < 0.11  # the table's rounding


def test_normal_pairs_get_no_such_note(tmp_path: Path) -> None:
    ratios = np.random.default_rng(3).normal(0.0, 0.03, 16)
    notes = judged(tmp_path, ratios).facts.limits_of_evidence
    assert not any("times as wide" in n for n in notes)
