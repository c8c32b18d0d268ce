"""The CUDA example's decide-servers set with a soak, on an H100, re-decided from its data.

examples/llama-cpp-cuda/recorded/20261207-024207-cuda135.tar.xz is `qualify run --candidate
cuda135 --profile decide-servers` with the example's controls on one NVIDIA H100 (driver
580.159.04), its arms built on another machine and imported (`offline/pack.sh --arms`), the
stages in the order soak, numerics, serving, compile, bench (`QUALIFY_ORDER`); the lease ended
during serving's A/A member, so compile and bench did not run. Every command ran as nobody in
a cgroup of its own, a PID namespace and a bubblewrap mount namespace (the set's run.json says
so). The soak ran the three servers at once for 17 minutes after a one-minute warm-up.

The sampler of that run asked nvidia-smi from inside the containment, where the driver names no
process of the host's, so the servers' own GPU memory was written as 0 in every sample; the run
said PASS on that series. Re-decided with today's judge the zeros are missing data and the soak
is a WARN that says why. CI has no GPU: this test unpacks the set, re-judges it with the
example's plan and checks what the example's README says of it. Nothing stands in for anything.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from recorded_runs import Rejudge, unpack
from recorded_runs import check_result as result

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama-cpp-cuda"
ARCHIVE = EXAMPLE / "recorded" / "20261207-024207-cuda135.tar.xz"
README = EXAMPLE / "README.md"
REVISION = "6121cd6c35d53099db2ece2f3f9bea9b882763a2"
SOAK = ("50-soak", "llama-server-soak")


@pytest.fixture(scope="module")
def rejudged(rejudge_recorded: Rejudge, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rejudge_recorded(EXAMPLE, unpack(ARCHIVE, tmp_path_factory.mktemp("recorded")))


def _row(table: dict[str, Any], **match: str) -> dict[str, Any]:
    columns = list(table["columns"])
    for values in table["rows"]:
        row = dict(zip(columns, values, strict=True))
        if all(row[k] == v for k, v in match.items()):
            return row
    raise AssertionError(f"no row {match} in {table['title']}")


def test_one_gpu_model_and_commands_as_nobody(rejudged: Path) -> None:
    saved = json.loads((rejudged / "run.json").read_text())
    assert saved["profile"] == "decide-servers"
    assert (saved["provenance"]["git"]["rev"], saved["provenance"]["git"]["dirty"]) == (REVISION, False)
    names = {g["name"] for g in saved["provenance"]["gpus"]}
    for member in ("cuda135", "positive-pinned", "negative-kvq4", "negative-ub256"):
        member_run = json.loads((rejudged / member / "run.json").read_text())
        names |= {g["name"] for g in member_run["provenance"]["gpus"]}
    assert names == {"NVIDIA H100 80GB HBM3"}
    containment = saved["containment"]
    assert containment["processes"].startswith("cgroup v2 (")
    assert containment["records"].startswith("read-only mount (bubblewrap)")
    assert containment["privileges"].startswith("commands run as nobody")
    assert "PID namespace of their own" in containment["privileges"]


def test_the_soak_served_every_request_and_judged_memory_and_latency(rejudged: Path) -> None:
    for member in ("cuda135", "positive-pinned"):
        soak = result(rejudged, member, *SOAK)
        assert soak["spec"]["params"]["duration_s"] == 1020 and soak["spec"]["params"]["concurrent"]
        requests = next(t for t in soak["tables"] if t["title"] == "Requests")
        for role in ("pinned", "candidate"):
            row = _row(requests, role=role)
            assert row["sent"] == row["ok"] > 4000
            assert (row["error"], row["stalled"]) == (0, 0)
        judged = soak["judged"]
        assert "anon_mib against its budget" in judged and "tpot_p99_ms against its budget" in judged
        assert not any(j.startswith("nvidia_proc_mib") for j in judged)


def test_the_servers_gpu_memory_was_never_seen_and_the_soak_says_so(rejudged: Path) -> None:
    """The recorded telemetry holds a device total of gigabytes and 0 for each server's own:
    re-decided, the soak is a WARN naming the unseen series, never a PASS on zeros."""
    for member in ("cuda135", "positive-pinned"):
        telemetry = pd.read_parquet(
            rejudged / member / "50-soak" / "llama-server-soak" / "candidate" / "telemetry.parquet"
        )
        assert telemetry["nvidia_used_bytes"].min() > 1024**3
        assert (telemetry["nvidia_proc_bytes"] == 0).all()
        soak = result(rejudged, member, *SOAK)
        assert soak["verdict"] == "WARN"
        assert "the server's own GPU memory was not measured" in soak["reason"]


def test_the_candidates_anonymous_memory_grew_within_its_budget(rejudged: Path) -> None:
    """The one trend the soak found: cuda135's server gained anonymous memory throughout (p below
    10⁻⁵), by less over the 28-minute horizon than the 64 MiB budget even at the interval's top."""
    soak = result(rejudged, "cuda135", *SOAK)
    trends = next(t for t in soak["tables"] if t["title"].startswith("Trends"))
    row = _row(trends, series="server anonymous memory (MiB)", role="candidate")
    low, high = (float(v) for v in re.findall(r"[-+][\d.]+", str(row["95 % interval"])))
    assert float(str(row["p levels (AR(1) corrected)"])) < 1e-5
    assert 0 < low < high
    assert high * 1680 / 3600 < 64
    text = README.read_text()
    assert f"{float(str(row['slope per h'])):+.1f} MiB an hour" in text


def test_numerics_and_serving_as_the_readme_says(rejudged: Path) -> None:
    for member in ("cuda135", "positive-pinned"):
        assert result(rejudged, member, "30-numerics", "matched-token-kld")["verdict"] == "PASS"
    assert result(rejudged, "negative-kvq4", "30-numerics", "matched-token-kld")["verdict"] == "FAIL"
    assert result(rejudged, "cuda135", "40-serving", "llama-server")["verdict"] == "INCONCLUSIVE"
    assert result(rejudged, "positive-pinned", "40-serving", "llama-server")["verdict"] == "WARN"
    summary = (rejudged / "summary.md").read_text()
    assert summary.startswith("## Toolchain qualification: **INCOMPLETE**")
    assert "compile not run, bench not run" in summary
