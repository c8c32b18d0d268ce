"""Every recorded run of the examples re-decides and renders to the bytes it rendered to when
the digests in recorded_reports.json were taken.

Each archive under examples/*/recorded/ holding a run, a run set or a bisect is unpacked, every
run in it re-decided with its example's plan and rendered as `qualify report --rejudge` does
(report.json, summary.md, report.html, junit.xml; a set's members too), a bisect's bisect.md
and bisect.html rendered again from its saved state, and two of them merged into a fleet report
as `qualify merge` does. The sha256 of each file is compared with the recorded one, so a change
of the report model, the judges or the templates that moves a byte of any recorded report is
seen, and one meant to move them is seen too: it rewrites the digests and says why.

What a rendering cannot keep the same from one day or folder to the next is written as a
placeholder before the digest: the time of this re-decision (and of this merge), the folder the
run was unpacked into, qualify's version, and the path of any checkout the examples lay in: this
one's, and the one a recorded run was once re-decided in, which the run keeps in its history
(a placeholder for this checkout alone would change those bytes on a host whose checkout lies
where that one did).

    python tests/report/test_recorded_reports.py --write   # take the digests again

Nothing stands in: these are the hosts' measurements, judged and rendered by this qualify.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from qualify import __version__, kinds
from qualify.bisect.drive import drive
from qualify.bisect.outcomes import Measured
from qualify.bisect.page import html_page
from qualify.bisect.report import markdown
from qualify.bisect.resume import open_state, read_file
from qualify.bisect.state import Step
from qualify.core import sealkey
from qualify.core.runstore import RunDir
from qualify.pipeline.rejudge import project_root_for, rejudge_with_project_plan
from qualify.report.charts import render_svg
from qualify.report.fleetmerge import merge
from qualify.report.render import render

REPO = Path(__file__).resolve().parents[2]
DIGESTS = Path(__file__).with_name("recorded_reports.json")
CUDA = REPO / "examples" / "llama-cpp-cuda"
ROCM = REPO / "examples" / "llama-cpp-rocm"

#: Each recorded archive and the project whose plan re-decides the runs in it.
RECORDED = {
    "cuda-run": (CUDA / "recorded" / "20261201-162842-cuda135.tar.xz", CUDA),
    "cuda-decide-set": (CUDA / "recorded" / "20261202-151725-cuda135.tar.xz", CUDA),
    "cuda-controls-set": (CUDA / "recorded" / "20261203-092533-cuda135.tar.xz", CUDA),
    "cuda-servers-set": (CUDA / "recorded" / "20261204-171520-cuda135.tar.xz", CUDA),
    "cuda-contained-set": (CUDA / "recorded" / "20261206-192034-cuda135.tar.xz", CUDA),
    "cuda-soak-set": (CUDA / "recorded" / "20261207-024207-cuda135.tar.xz", CUDA),
    "cuda-continued-set": (CUDA / "recorded" / "20261207-024207-cuda135-continued.tar.xz", CUDA),
    "rocm-run": (ROCM / "recorded" / "20261205-081523-rocm72.tar.xz", ROCM),
    "rocm-run-sources": (ROCM / "recorded" / "20261206-234850-rocm72.tar.xz", ROCM),
    "cuda-bisect": (CUDA / "recorded" / "bisect" / "20261205-111849-bisect-nvcc.tar.xz", CUDA / "bisect"),
    "cuda-bisect-series": (
        CUDA / "recorded" / "bisect" / "20261205-112904-bisect-nvcc.tar.xz",
        CUDA / "bisect",
    ),
}
#: Two hosts' runs merged as `qualify merge --allow-mixed` merges them: a run set and a run.
FLEET = ("cuda-controls-set", "rocm-run")
CASES = [*RECORDED, "fleet"]

REPORT_FILES = ("report.json", "summary.md", "report.html", "junit.xml", "bisect.md", "bisect.html")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")
#: An absolute path up to the examples folder: this checkout's, or a recorded one.
_CHECKOUT = re.compile(r"/[\w.+-][\w./+-]*?(?=/examples/llama-cpp)")
_VERSION = re.compile(r'("qualify_version": "|qualify )' + re.escape(__version__) + r"\b")


def _normalized(text: str, where: Path, since: datetime) -> str:
    """`text` with what differs from one rendering to the next as placeholders."""

    def stamp(match: re.Match[str]) -> str:
        written = datetime.fromisoformat(match[0].replace("Z", "+00:00"))
        return "<now>" if written >= since else match[0]

    text = _CHECKOUT.sub("<checkout>", text.replace(str(where), "<where>"))
    return _VERSION.sub(r"\g<1><version>", _TIME.sub(stamp, text))


def _digests(where: Path, since: datetime) -> dict[str, str]:
    """The sha256 of every report file qualify wrote under `where` (beside a run.json or a
    bisect.json: a check's own junit.xml is what it measured), by its path there."""
    found = sorted(
        p
        for p in where.rglob("*")
        if p.name in REPORT_FILES and any((p.parent / n).is_file() for n in ("run.json", "bisect.json"))
    )
    return {
        str(path.relative_to(where)): hashlib.sha256(
            _normalized(path.read_text(encoding="utf-8"), where, since).encode("utf-8")
        ).hexdigest()
        for path in found
    }


def _unpacked(archive: Path, where: Path) -> Path:
    with tarfile.open(archive) as tar:
        tar.extractall(where, filter="data")
    return where / archive.name.removesuffix(".tar.xz")


def _runs(folder: Path) -> Iterator[Path]:
    """The runs of a recorded folder: itself, or a bisect's steps."""
    if (folder / "run.json").is_file():
        yield folder
    yield from sorted(p.parent for p in folder.glob("steps/*/*/run.json"))


def _render_bisect(folder: Path) -> None:
    """bisect.md and bisect.html again from the saved state, as `qualify bisect --run` ends."""
    saved = read_file(folder / "bisect.json")
    state = open_state(
        folder / "bisect.json", saved.series, mode=saved.mode, retries=saved.retries, context=saved.context
    )

    def probe(step: Step) -> Measured:
        raise AssertionError(f"a recorded bisect probes {step.name} again")

    answer = drive(state, probe)
    (folder / "bisect.md").write_text(markdown(answer, state), encoding="utf-8")
    (folder / "bisect.html").write_text(html_page(answer, state, render_svg), encoding="utf-8")


def rendered(case: str, where: Path) -> dict[str, str]:
    """The digests of `case`'s reports, re-decided and rendered under `where` now, by a host
    whose seal key made none of them: a host's key (kept from one run to the next in its state
    folder) reads the seal of a run it made itself as verified, and that run's first screen
    would then differ from every other host's."""
    saved = os.environ.get(sealkey.ENV)
    os.environ[sealkey.ENV] = str(where / "state")
    try:
        return _rendered(case, where)
    finally:
        if saved is None:
            os.environ.pop(sealkey.ENV, None)
        else:
            os.environ[sealkey.ENV] = saved


def _rendered(case: str, where: Path) -> dict[str, str]:
    since = datetime.now(UTC) - timedelta(seconds=1)
    if case == "fleet":
        out = where / "fleet"
        merge([RECORDED[name][0] for name in FLEET], out, allow_mixed=True)
        render(RunDir(out))
        return _digests(out, since)
    archive, project = RECORDED[case]
    folder = _unpacked(archive, where)
    for run in _runs(folder):
        # The plan is this checkout's: a run whose recorded project exists here would be
        # re-decided with that one's.
        assert project_root_for(RunDir(run), project) == project, run
        with RunDir(run).writing():
            rejudge_with_project_plan(RunDir(run), project)
        render(RunDir(run))
    if (folder / "bisect.json").is_file():
        _render_bisect(folder)
    return _digests(folder, since)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_a_recorded_run_renders_as_it_did(case: str, tmp_path: Path) -> None:
    expected = json.loads(DIGESTS.read_text())[case]
    now = rendered(case, tmp_path)
    moved = sorted(name for name in expected.keys() | now.keys() if expected.get(name) != now.get(name))
    assert not moved, f"{case}: these reports render differently now: {moved}"


def test_the_digests_cover_every_recorded_archive() -> None:
    """An archive added under examples/*/recorded/ holding a run or a bisect has its digests."""
    holding = set()
    for archive in REPO.glob("examples/*/recorded/**/*.tar.xz"):
        with tarfile.open(archive) as tar:
            names = [Path(n) for n in tar.getnames()]
        if any(n.name in ("run.json", "bisect.json") and len(n.parts) <= 3 for n in names):
            holding.add(archive)
    assert holding == {archive for archive, _ in RECORDED.values()}
    assert set(json.loads(DIGESTS.read_text())) == set(CASES)


def _write() -> None:
    kinds.install()
    taken: dict[str, dict[str, str]] = {}
    for case in CASES:
        with tempfile.TemporaryDirectory() as scratch:
            taken[case] = rendered(case, Path(scratch))
        print(f"{case}: {len(taken[case])} files", file=sys.stderr)
    DIGESTS.write_text(json.dumps(taken, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="take the digests again")
    if parser.parse_args().write:
        _write()
