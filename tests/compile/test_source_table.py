"""The compile check's failures grouped by source file, on libraries clang-19 builds here.

Pinned links tests/compile/kernels' two translation units as built; the candidate links the
same tu_one and a tu_two whose device code is built for wave64 (`-mwavefrontsize64`), a real
change the judge fails (the wave size changed) in tu_two's kernels only. So tu_two.hip, the
second by name, must lead the table by its failures, and the line summary.md prints name it. A
candidate whose library is stripped names no source, and the table says why. Tables saved
before source files were read (without the column) are judged as before: no such table, no
such facts. The check's own scan, save and judge are used; nothing stands in.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from qualify.checks.base import SavedCheck
from qualify.checks.figures import Table
from qualify.compile.check import judge
from qualify.compile.kind import KIND
from qualify.compile.scan import save_tables, scan
from qualify.core.runstore import write_json
from qualify.pipeline.plan import load_plan
from qualify.records.compile import SOURCE_COLUMNS, UNKNOWN_SOURCE, KernelFacts
from qualify.report.views import CheckView, failing_sources

KERNELS = Path(__file__).parent / "kernels"
STAGES = Path(__file__).resolve().parents[2] / "examples" / "llama-cpp-rocm" / "stages"
TOOLS = ["clang++-19", "llvm-objcopy-19"]
MISSING = [tool for tool in TOOLS if shutil.which(tool) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"needs {', '.join(MISSING)} (apt-get install clang-19 llvm-19)"
)
HIP = [
    "-x",
    "hip",
    "--offload-arch=gfx1100",
    "--offload-arch=gfx1151",
    "-nogpulib",
    "-nogpuinc",
    "-O3",
    "-fPIC",
]


def run(*args: str | Path) -> None:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def library(root: Path, *tu_two_flags: str) -> Path:
    """root/lib/libhipk.so from tu_one and tu_two (built with `tu_two_flags`)."""
    (root / "lib").mkdir(parents=True)
    one, two = root / "tu_one.o", root / "tu_two.o"
    run("clang++-19", *HIP, "-c", KERNELS / "tu_one.hip", "-o", one)
    run("clang++-19", *HIP, *tu_two_flags, "-c", KERNELS / "tu_two.hip", "-o", two)
    out = root / "lib" / "libhipk.so"
    run("clang++-19", "-shared", one, two, "-o", out)
    one.unlink()
    two.unlink()
    return out


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("sources")
    made = {
        "pinned": library(base / "pinned"),
        "wave64": library(base / "wave64", "-Xarch_device", "-mwavefrontsize64"),
    }
    stripped = base / "stripped" / "lib"
    stripped.mkdir(parents=True)
    run("llvm-objcopy-19", "--strip-all", made["wave64"], stripped / "libhipk.so")
    return {**made, "stripped": stripped.parent}


def judged(folder: Path, pinned: Path, candidate: Path, drop_sources: bool = False) -> Any:
    """The check's judgement of `pinned` and `candidate` scanned and saved as `measure` saves them."""
    [spec] = [c for c in load_plan(STAGES).stage("compile").checks if c.kind == KIND.name]
    for role, root in (("pinned", pinned), ("candidate", candidate)):
        found = scan(root, host_patterns=())
        if drop_sources:  # as a run scanned before source files were read saved its tables
            found.tables = {
                f: t.drop(columns=["source_file"]) for f, t in found.tables.items() if "source_file" in t
            }
        measurement = {
            "role": role, "arm": role, "root": str(root), "counts": found.counts(), "files": found.files,
            "unreadable": found.unreadable, "tables": save_tables(found, folder / role), "seconds": 0.1,
        }  # fmt: skip
        write_json(folder / role / "measurement.json", measurement)
    return judge(SavedCheck(folder, spec, ("pinned", "candidate")))


def source_table(tables: tuple[Table, ...]) -> tuple[int, Table] | None:
    return next(((i, t) for i, t in enumerate(tables) if t.columns == SOURCE_COLUMNS), None)


def test_the_failures_are_grouped_by_source_file_most_first(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    judgement = judged(tmp_path, libraries["pinned"].parent.parent, libraries["wave64"].parent.parent)
    assert judgement.verdict.value == "FAIL"
    found = source_table(judgement.tables)
    assert found is not None
    at, table = found
    # Right after what goes with the failures, when that is said; first otherwise.
    leading = [t for t in judgement.tables if t.lead]
    assert at == len(leading) - 1 and table.lead
    # Two targets: tu_two's one kernel fails on both, tu_one's three kernels are unchanged.
    assert [r[:4] for r in table.rows] == [("tu_two.hip", 2, 2, 0), ("tu_one.hip", 6, 0, 0)]
    assert table.rows[0][4] == "2 change wave size"
    facts = judgement.facts
    assert isinstance(facts, KernelFacts)
    assert [(s.source, s.kernels, s.FAIL) for s in facts.sources] == [("tu_two.hip", 2, 2)]
    view = CheckView(
        "kernels", KIND.name, "FAIL", judgement.reason, "", False, None, [], list(judgement.tables)
    )
    assert failing_sources(view) == "tu_two.hip: 2 of 2 kernels fail"


def test_a_stripped_candidate_names_no_source_and_says_why(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    judgement = judged(tmp_path, libraries["pinned"].parent.parent, libraries["stripped"])
    found = source_table(judgement.tables)
    assert found is not None
    rows = {r[0]: r for r in found[1].rows}
    # The candidate's kernels have no source: pinned's names none of them (it has them all).
    assert set(rows) == {UNKNOWN_SOURCE}
    assert rows[UNKNOWN_SOURCE][1:4] == (8, 2, 0)
    assert rows[UNKNOWN_SOURCE][4] == "2 change wave size; why not known: stripped: no .symtab"


def test_tables_saved_before_source_files_are_judged_as_before(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    pinned, candidate = libraries["pinned"].parent.parent, libraries["wave64"].parent.parent
    before = judged(tmp_path / "before", pinned, candidate, drop_sources=True)
    now = judged(tmp_path / "now", pinned, candidate)
    assert source_table(before.tables) is None
    assert [t for t in now.tables if t.columns != SOURCE_COLUMNS] == list(before.tables)
    assert "sources" not in json.loads(json.dumps(before.as_json()["facts"]))
    assert (before.verdict, before.reason, before.findings) == (now.verdict, now.reason, now.findings)
