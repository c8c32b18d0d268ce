"""`qualify merge` reads archives as outside input: caps on what it unpacks, no page of theirs served.

Every archive here is a real tar or zip built by the test around a real run folder (a small
project with one `command` stage, run by the real CLI); the sparse member is a real sparse file
(os.truncate) archived by GNU tar's --sparse, so the archive is a few hundred bytes while the
file is gigabytes long. Caps below the defaults are set the way an operator sets them
(`--max-file`, ...) or, to keep the archives small, by lowering the module's documented
constants for one test.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
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


def _refusing_filter(real: Callable[..., object], method: str) -> Callable[..., object]:
    def old(self: tarfile.TarFile, *args: object, **kwargs: object) -> object:
        if "filter" in kwargs:
            raise TypeError(f"TarFile.{method}() got an unexpected keyword argument 'filter'")
        return real(self, *args, **kwargs)

    return old


@pytest.fixture(params=["data filter", "no data filter"])
def tar_support(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """tarfile as this Python has it, or as Python 3.11.0 to 3.11.3 have it (Debian 12's is
    3.11.2): no data filter, and extract and extractall refuse the `filter` argument."""
    if request.param == "no data filter":
        monkeypatch.delattr(tarfile, "data_filter")
        for method in ("extract", "extractall"):
            monkeypatch.setattr(
                tarfile.TarFile, method, _refusing_filter(getattr(tarfile.TarFile, method), method)
            )
    return str(request.param)


def test_a_tar_is_merged_whether_tarfile_has_a_data_filter_or_not(
    a_run: Path, tmp_path: Path, tar_support: str
) -> None:
    """On Python 3.11.2 it ended in "internal error: TypeError(... unexpected keyword argument
    'filter')". A run's own links, hard and symbolic, come through as the filter lets them."""
    run = copy_of(a_run, tmp_path / "src")
    check = run / "10-build" / "build-check"
    (check / "tool.sh").write_text("#!/bin/sh\n")
    (check / "tool.sh").chmod(0o4775)
    (check / "again.sh").hardlink_to(check / "tool.sh")
    (check / "latest").symlink_to("tool.sh")
    archive = tmp_path / "host.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(run, arcname=run.name)
    out = tmp_path / "fleet"
    code, said = merge(str(archive), "--out", str(out))
    assert code in (0, 3), said
    copied = out / "hosts" / "box" / "10-build" / "build-check"
    assert (copied / "again.sh").read_text() == (copied / "tool.sh").read_text() == "#!/bin/sh\n"
    assert (copied / "tool.sh").stat().st_mode & 0o7777 == 0o755  # no set-id, no group write
    assert (copied / "latest").readlink() == Path("tool.sh")


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


ESCAPED = "qualify-merge-escaped.txt"

#: Each: the members added after the run's own, and what the refusal says.
MALICIOUS = {
    "parent": ([_member(f"../{ESCAPED}")], f"'../{ESCAPED}' points outside the archive"),
    "absolute": (
        [_member(f"/tmp/{ESCAPED}")],
        f"'/tmp/{ESCAPED}' points outside the archive",
    ),
    "link out": ([_member("R/out", tarfile.SYMTYPE, "../../..")], "links to '../../..', outside the archive"),
    "absolute link": ([_member("R/etc", tarfile.SYMTYPE, "/etc")], "links to '/etc', outside the archive"),
    "hard link out": ([_member("R/pw", tarfile.LNKTYPE, "/etc/passwd")], "'/etc/passwd' points outside"),
    "device": ([_member("R/tty", tarfile.CHRTYPE)], "'R/tty' is a character device"),
    "pipe": ([_member("R/fifo", tarfile.FIFOTYPE)], "'R/fifo' is a named pipe"),
    "beneath a link": (
        [_member("R/here", tarfile.SYMTYPE, "."), _member(f"R/here/{ESCAPED}")],
        f"'R/here/{ESCAPED}' lies beneath the link 'R/here'",
    ),
    # Each link alone stays inside; followed, "R/up" leads to the folder above the archive's.
    "chain of links": (
        [_member("R/up", tarfile.SYMTYPE, "self/../.."), _member("R/self", tarfile.SYMTYPE, ".")],
        "'R/up' links to 'self/../..', outside the archive",
    ),
}


@pytest.mark.parametrize("case", MALICIOUS)
def test_a_tar_member_reaching_out_is_refused(
    a_run: Path, tmp_path: Path, tar_support: str, case: str
) -> None:
    """As tarfile's data filter refuses them, with or without one in this Python."""
    added, words = MALICIOUS[case]
    archive = tmp_path / "host.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(a_run, arcname="R")
        for info in added:
            tar.addfile(info, io.BytesIO() if info.isreg() else None)
    out = tmp_path / "fleet"
    code, said = merge(str(archive), "--out", str(out))
    assert code == 4 and str(archive) in said and words in said, said
    assert "nothing of it was merged" in said or "points outside" in said, said
    assert "internal error" not in said and not out.exists()
    # The archive is unpacked in a folder of the temporary directory: `..` leads there.
    assert not Path(tempfile.gettempdir(), ESCAPED).exists() and not Path("/tmp", ESCAPED).exists()


def test_a_tar_holding_one_name_twice_is_named(a_run: Path, tmp_path: Path) -> None:
    """As a zip holding one name twice: which of the two is the run's is not guessed."""
    run = copy_of(a_run, tmp_path / "src")
    archive = tmp_path / "host.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(run, arcname=run.name)
        forged = _member(f"{run.name}/run.json")
        forged.size = 2
        tar.addfile(forged, io.BytesIO(b"{}"))
    out = tmp_path / "fleet"
    code, said = merge(str(archive), "--out", str(out))
    assert code == 4, said
    assert str(archive) in said and f"'{run.name}/run.json' twice" in said and "2 bytes" in said, said
    assert "internal error" not in said and "hint:" in said and not out.exists()
