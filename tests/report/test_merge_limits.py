"""`qualify merge` reads archives as outside input: caps on what it unpacks, no page of theirs served.

Every archive here is a real tar or zip built by the test around a real run folder (a small
project with one `command` stage, run by the real CLI); the sparse member is a real sparse file
(os.truncate) archived by GNU tar's --sparse, so the archive is a few hundred bytes while the
file is gigabytes long. Caps below the defaults are set the way an operator sets them
(`--max-file`, ...) or, to keep the archives small, by lowering the module's documented
constants for one test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import command_stage, qualify_proc
from readonly import read_only
from typer.testing import CliRunner

from qualify.cli import app
from qualify.report import unpack

runner = CliRunner()
needs_gnu_tar = pytest.mark.skipif(shutil.which("tar") is None, reason="needs GNU tar (--sparse)")


@pytest.fixture(scope="module")
def a_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real run of a one-stage project, made once; tests archive copies of it."""
    root = tmp_path_factory.mktemp("merge-project")
    (root / "qualify.toml").write_text(
        'plan = "stages"\ninherit_env = []\n'
        '[arms.pinned]\ninstallable = ".#default"\n[arms.cand]\ninstallable = ".#cand"\n'
    )
    (root / "stages").mkdir()
    (root / "stages" / "10-build.toml").write_text(command_stage("build", "true"))
    done = qualify_proc("run", "--candidate", "cand", "--host-label", "box", "--project", str(root))
    assert done.returncode in (0, 3), done.stdout + done.stderr
    [run] = [d for d in (root / "runs").iterdir() if (d / "run.json").is_file()]
    return run


def copy_of(a_run: Path, where: Path) -> Path:
    run = where / a_run.name
    shutil.copytree(a_run, run, symlinks=True, ignore=shutil.ignore_patterns("lock"))
    return run


def merge(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["merge", *args])
    return result.exit_code, " ".join(result.output.split())


def sparse_archive(run: Path, archive: Path, length: int) -> Path:
    """`run` with a sparse file of `length` bytes in it, archived by GNU tar --sparse."""
    big = run / "10-build" / "build-check" / "big.bin"
    big.touch()
    os.truncate(big, length)
    assert big.stat().st_blocks * 512 < 1 << 20  # a hole, not data
    subprocess.run(["tar", "--sparse", "-czf", str(archive), "-C", str(run.parent), run.name], check=True)
    assert archive.stat().st_size < 64 << 10
    return archive


@needs_gnu_tar
def test_a_sparse_member_counts_by_its_length(
    a_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 MiB of hole in a tiny .tgz, against a 16 MiB cap on one file: refused before a byte of
    it is written (it used to be unpacked, then copied as 64 MiB of zeros)."""
    monkeypatch.setattr(unpack, "MAX_FILE_BYTES", 16 << 20, raising=False)
    archive = sparse_archive(copy_of(a_run, tmp_path / "src"), tmp_path / "host.tgz", 64 << 20)
    out = tmp_path / "fleet"
    code, said = merge(str(archive), "--out", str(out))
    assert code == 4, said
    assert str(archive) in said and "big.bin" in said and "16 MiB" in said and "--max-file" in said, said
    assert not out.exists() and not list(tmp_path.glob(".fleet.*"))


@needs_gnu_tar
def test_the_default_cap_on_one_file_holds(a_run: Path, tmp_path: Path) -> None:
    """The documented default (16 GiB): a member one byte longer is refused from its header."""
    archive = sparse_archive(
        copy_of(a_run, tmp_path / "src"), tmp_path / "host.tgz", unpack.MAX_FILE_BYTES + 1
    )
    code, said = merge(str(archive), "--out", str(tmp_path / "fleet"))
    assert code == 4 and "16 GiB" in said and str(archive) in said, said
    assert unpack.MAX_FILE_BYTES == 16 << 30 and unpack.MAX_UNPACKED_BYTES == 32 << 30
    assert unpack.MAX_FILES == 100_000


@needs_gnu_tar
def test_an_operator_sets_the_caps_on_the_command_line(a_run: Path, tmp_path: Path) -> None:
    archive = sparse_archive(copy_of(a_run, tmp_path / "src"), tmp_path / "host.tgz", 3 << 20)
    code, said = merge(str(archive), "--out", str(tmp_path / "a"), "--max-file", "1M")
    assert code == 4 and "1 MiB" in said and "'" + a_run.name + "/10-build/build-check/big.bin'" in said, said
    code, said = merge(str(archive), "--out", str(tmp_path / "b"), "--max-unpacked", "2MiB")
    assert code == 4 and "more than 2 MiB" in said and "--max-unpacked" in said, said
    code, said = merge(str(archive), "--out", str(tmp_path / "c"), "--max-files", "3")
    assert code == 4 and "more than 3 entries" in said and "--max-files" in said, said
    code, said = merge(str(archive), "--out", str(tmp_path / "d"), "--max-file", "lots")
    assert code == 4 and "--max-file 'lots': not a size" in said, said
    code, said = merge(str(archive), "--out", str(tmp_path / "e"), "--max-file", "4M")
    assert code in (0, 3), said
    big = next((tmp_path / "e" / "hosts" / "box").rglob("big.bin"))
    assert big.stat().st_size == 3 << 20


def test_a_zip_of_zeros_is_capped_in_total(
    a_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A zip bomb's shape: files of zeros, deflated to almost nothing (each under the per-file
    cap, together over the total)."""
    monkeypatch.setattr(unpack, "MAX_UNPACKED_BYTES", 8 << 20, raising=False)
    run = copy_of(a_run, tmp_path / "src")
    archive = tmp_path / "host.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for path in run.rglob("*"):
            zipped.write(path, Path(run.name) / path.relative_to(run))
        for n in range(6):
            zipped.writestr(f"{run.name}/logs/zeros-{n}.log", bytes(2 << 20))
    assert archive.stat().st_size < 256 << 10
    out = tmp_path / "fleet"
    code, said = merge(str(archive), "--out", str(out))
    assert code == 4 and str(archive) in said and "more than 8 MiB" in said, said
    assert not out.exists()


def test_an_archive_of_many_entries_is_capped(
    a_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unpack, "MAX_FILES", 200, raising=False)
    run = copy_of(a_run, tmp_path / "src")
    for n in range(300):
        (run / "logs-extra").mkdir(exist_ok=True)
        (run / "logs-extra" / f"{n}.log").write_text("")
    archive = tmp_path / "host.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(run, arcname=run.name)
    code, said = merge(str(archive), "--out", str(tmp_path / "fleet"))
    assert code == 4 and str(archive) in said and "more than 200 entries" in said, said


def test_a_zip_entry_reaching_out_is_refused(a_run: Path, tmp_path: Path) -> None:
    archive = tmp_path / "host.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr(f"{a_run.name}/run.json", (a_run / "run.json").read_text())
        zipped.writestr("../escaped.txt", "out")
    code, said = merge(str(archive), "--out", str(tmp_path / "fleet"))
    assert code == 4 and "'../escaped.txt' points outside the archive" in said, said
    assert not (tmp_path / "escaped.txt").exists()


SCRIPT = "<script>document.title = 'owned'</script>"


@pytest.mark.parametrize("kind", ["tgz", "zip", "folder"])
def test_each_hosts_report_is_rendered_again_and_no_page_of_theirs_is_kept(
    a_run: Path, tmp_path: Path, kind: str
) -> None:
    """The host's report.html (a script in it) and a page of its own used to be copied and
    linked from the fleet page."""
    run = copy_of(a_run, tmp_path / "src")
    (run / "report.html").write_text(f"<html><body>{SCRIPT}</body></html>")
    (run / "10-build" / "page.html").write_text(SCRIPT)
    (run / "10-build" / "picture.svg").write_text(f"<svg>{SCRIPT}</svg>")
    given: Path = run
    if kind == "tgz":
        given = tmp_path / "host.tgz"
        with tarfile.open(given, "w:gz") as tar:
            tar.add(run, arcname=run.name)
    elif kind == "zip":
        given = tmp_path / "host.zip"
        with zipfile.ZipFile(given, "w") as zipped:
            for path in run.rglob("*"):
                zipped.write(path, Path(run.name) / path.relative_to(run))
    out = tmp_path / "fleet"
    code, said = merge(str(given), "--out", str(out))
    assert code in (0, 3), said
    host = out / "hosts" / "box"
    pages = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.suffix in (".html", ".svg"))
    assert pages == ["hosts/box/report.html", "report.html"]
    for page in pages:
        assert SCRIPT not in (out / page).read_text()
    # qualify's own report of the host, from its run.json and stage.json.
    model = json.loads((host / "report.json").read_text())
    assert model["created_at"] == json.loads((run / "run.json").read_text())["created_at"]
    assert "build" in [s["name"] for s in model["stages"]] and "build" in (host / "report.html").read_text()
    links = re.findall(r'href="([^"#]+)', (out / "report.html").read_text())
    assert links and all((out / link).is_file() for link in links), links


def test_out_that_is_a_file_is_named(a_run: Path, tmp_path: Path) -> None:
    """It ended in "internal error: NotADirectoryError" with no path."""
    taken = tmp_path / "fleet.html"
    taken.write_text("mine")
    for out in (taken, taken / "inside"):
        code, said = merge(str(a_run), "--out", str(out))
        assert code == 4 and str(out) in said and "is a file" in said, said
        assert "internal error" not in said and "--out" in said
    assert taken.read_text() == "mine"


def test_out_inside_a_merged_run_is_refused(a_run: Path, tmp_path: Path) -> None:
    run = copy_of(a_run, tmp_path / "src")
    code, said = merge(str(run), "--out", str(run / "fleet"))
    assert code == 4 and "is inside" in said and not (run / "fleet").exists(), said


def test_out_in_an_unwritable_place_is_named(a_run: Path, tmp_path: Path) -> None:
    with read_only(tmp_path / "ro") as place:
        out = place / "fleet"
        code, said = merge(str(a_run), "--out", str(out))
    assert code == 2 and str(out) in said and "writable" in said and "internal error" not in said, said


def test_hard_links_count_each_time_they_are_written(
    a_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One file of zeros and 40 hard links to it: a tiny .tgz that used to pass a 16 MiB cap and
    write 82 MiB (each link is a whole copy once the run is copied under the fleet's folder)."""
    monkeypatch.setattr(unpack, "MAX_UNPACKED_BYTES", 16 << 20, raising=False)
    run = copy_of(a_run, tmp_path / "src")
    zeros = run / "10-build" / "build-check" / "zeros.bin"
    zeros.write_bytes(bytes(2 << 20))
    for n in range(40):
        os.link(zeros, zeros.with_name(f"again-{n}.bin"))
    archive = tmp_path / "host.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(run, arcname=run.name)
    assert archive.stat().st_size < 64 << 10
    with tarfile.open(archive) as tar:
        assert sum(m.islnk() for m in tar) == 40
    out = tmp_path / "fleet"
    code, said = merge(str(archive), "--out", str(out))
    assert code == 4 and str(archive) in said and "more than 16 MiB" in said and "--max-unpacked" in said, (
        said
    )
    assert not out.exists() and not list(tmp_path.glob(".fleet.*"))
    # Under a cap they fit in, they are merged, every copy counted and whole.
    code, said = merge(str(archive), "--out", str(out), "--max-unpacked", "128M")
    assert code in (0, 3), said
    copies = list((out / "hosts" / "box").rglob("again-*.bin"))
    assert len(copies) == 40 and all(c.stat().st_size == 2 << 20 for c in copies)


def test_a_zip_holding_one_name_twice_is_named(a_run: Path, tmp_path: Path) -> None:
    """Which of the two is the run's? Neither is guessed: the archive is refused, naming it."""
    run = copy_of(a_run, tmp_path / "src")
    archive = tmp_path / "host.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in run.rglob("*"):
            zipped.write(path, Path(run.name) / path.relative_to(run))
        with pytest.warns(UserWarning, match="Duplicate name"):
            zipped.writestr(f"{run.name}/run.json", "{}")
    out = tmp_path / "fleet"
    code, said = merge(str(archive), "--out", str(out))
    assert code == 4, said
    assert str(archive) in said and f"'{run.name}/run.json'" in said and "twice" in said, said
    assert "internal error" not in said and "hint:" in said and not out.exists()
