"""Find every kernel in an arm's own files: AMDGPU, CUDA and host kernels, as tables.

Contract of `scan(root, ...)`: `root` is an arm's out path (or any directory or file); every
regular file under it whose relative path matches one of `globs` is opened once and read by
its magic bytes. Symlinks that lead outside `root` are not followed, so an arm is judged by
its own files and never by the store paths it merely depends on. The result holds one table
(pandas DataFrame, columns fixed below) per family:

- ``amdgpu``: one row per kernel per code object (a kernel built into two translation units
  or two libraries is two rows), figures as the metadata note names them, and the source file
  (translation unit) its code object was compiled from, where the host ELF says it
  (`qualify.compile.sourcefiles`);
- ``cuda``: one row per kernel per cubin, with ptxas spill bytes when a log was given, and its
  source file as for AMDGPU;
- ``host``: one row per host function per binary (clones folded), code size and stack frame.

Given disassemblers (`mix`), each AMDGPU code object and each cubin is also disassembled, in the
background while the files are read, and every GPU kernel's row gains its instruction mix
(`qualify.compile.instmix.MIX_COLUMNS`; empty when the mix was not read).

Each file's record in ``files`` says, as ``no_source_file``, why some of its GPU kernels have
no source file (stripped, wrappers discarded, `-fgpu-rdc`), once per reason. A file that looks
like a container but cannot be read is listed in ``unreadable`` with the reader's message,
never skipped in silence. Nothing is computed here that is not in the
files: occupancy and the comparison between arms come later (`qualify.compile.diff`).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from qualify.compile.amdgpu import AmdKernel, base_name, iter_kernels
from qualify.compile.containers import ARCHIVE_MAGIC, ELF_MAGIC
from qualify.compile.cubin import CudaKernel, read_cubin
from qualify.compile.hostkernels import HostKernelError, identifier, read_stack_usage, read_symbols
from qualify.compile.instmix import MIX_COLUMNS, TRAPS
from qualify.compile.mixreading import MixReading
from qualify.compile.nvfatbin import CubinError, iter_cubins
from qualify.compile.offloadbundle import BUNDLE_MAGIC, CCOB_MAGIC, OFFLOAD_BINARY_MAGIC, CodeObjectError
from qualify.compile.params import DEFAULT_PATTERNS
from qualify.compile.ptxaslog import attach_spills, read_ptxas_log
from qualify.core.runstore import write_parquet

FAMILIES = ("amdgpu", "cuda", "host")
_FATBIN_MAGIC = (0xBA55ED50).to_bytes(4, "little")
_MAGICS = (ELF_MAGIC, ARCHIVE_MAGIC, BUNDLE_MAGIC[:8], CCOB_MAGIC, OFFLOAD_BINARY_MAGIC, _FATBIN_MAGIC)

AMDGPU_COLUMNS = (
    "file", "origin", "bundle_id", "target", "processor", "name", "key", "symbol",
    "vgpr_count", "agpr_count", "sgpr_count", "vgpr_spill_count", "sgpr_spill_count",
    "private_segment_fixed_size", "group_segment_fixed_size", "wavefront_size",
    "max_flat_workgroup_size", "uses_dynamic_stack", "workgroup_processor_mode",
    "reqd_workgroup_size", "kernarg_segment_size", "code_object_version", "allocated_vgprs",
    "descriptor_problems", *MIX_COLUMNS, "source_file",
)  # fmt: skip
CUDA_COLUMNS = (
    "file", "origin", "target", "name", "key", "entry", "registers", "stack", "min_stack", "max_stack",
    "shared", "local", "constant", "max_threads", "reqntid", "maxreg_count",
    "spill_store_bytes", "spill_load_bytes", *MIX_COLUMNS, TRAPS, "source_file",
)  # fmt: skip
HOST_COLUMNS = ("file", "name", "key", "symbols", "code_size", "stack_bytes", "stack_qualifiers")
#: Text columns that may be empty in every row: typed as text even then, and in tables saved
#: before they existed.
_TEXT_COLUMNS = ("source_file",)
#: The reasons a file's record names at most, of why kernels have no source file.
_NOTES = 3


@dataclass
class KernelScan:
    """What `scan` found: a table per family, the files read, and the files it could not read."""

    root: str
    tables: dict[str, pd.DataFrame]
    files: list[dict[str, Any]] = field(default_factory=list)
    unreadable: list[dict[str, str]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {family: len(table) for family, table in self.tables.items()}


def scan(
    root: Path,
    globs: Sequence[str] = ("*",),
    host_patterns: Sequence[str] = DEFAULT_PATTERNS,
    stack_usage: Path | None = None,
    ptxas_logs: Sequence[Path] = (),
    mix: MixReading | None = None,
) -> KernelScan:
    """Read every kernel under `root` (a directory or one file).

    `globs` are fnmatch patterns on the path relative to `root` (``*`` also crosses ``/``);
    `host_patterns` select host functions (empty: no host kernels); `stack_usage` is a
    directory of ``-fstack-usage`` files (``.su``; default ``root/share/stack-usage``);
    `ptxas_logs` are saved ``ptxas -v`` outputs whose spill bytes are attached to the CUDA
    kernels they name; `mix` disassembles the GPU code objects (see the module).
    """
    files = _files(root, globs)
    amd_rows: list[dict[str, Any]] = []
    cuda_kernels: list[tuple[str, CudaKernel]] = []
    cuda_sources: list[str | None] = []  # beside cuda_kernels: each one's source file
    host_rows: list[dict[str, Any]] = []
    found = KernelScan(str(root), {})
    if stack_usage is None and root.is_dir():
        stack_usage = root / "share" / "stack-usage"
    stack = (
        read_stack_usage(sorted(stack_usage.rglob("*.su"))) if stack_usage and stack_usage.is_dir() else {}
    )
    for path, rel in files:
        with path.open("rb") as fh:
            head = fh.read(8)
        if not head.startswith(_MAGICS):
            continue
        data = path.read_bytes()
        counts: dict[str, int] = dict.fromkeys(FAMILIES, 0)
        notes: dict[str, None] = {}  # why kernels have no source file, in order, once each
        try:
            for blob, kernel in iter_kernels(data, rel):
                amd_rows.append(_amd_row(rel, blob.bundle_id, blob.source, kernel, blob.source_file))
                counts["amdgpu"] += 1
                if blob.source_note is not None:
                    notes[blob.source_note] = None
                if mix is not None:
                    mix.amdgpu(blob.source, blob.data)
        except CodeObjectError as exc:
            found.unreadable.append({"file": rel, "reader": "amdgpu", "message": str(exc)})
        try:
            for cubin in iter_cubins(data, rel):
                for cuda in read_cubin(cubin.data, cubin.source):
                    cuda_kernels.append((rel, cuda))
                    cuda_sources.append(cubin.source_file)
                    counts["cuda"] += 1
                    if cubin.source_note is not None:
                        notes[cubin.source_note] = None
                if mix is not None:
                    mix.cuda(cubin.source, cubin.data)
        except CubinError as exc:
            found.unreadable.append({"file": rel, "reader": "cuda", "message": str(exc)})
        if host_patterns and _is_linked_elf(data):
            try:
                for host in read_symbols(path, host_patterns):
                    su = stack.get(identifier(host.name))
                    host_rows.append(
                        {
                            "file": rel,
                            "name": host.name,
                            "key": host.name,
                            "symbols": " ".join(host.symbols),
                            "code_size": host.code_size,
                            "stack_bytes": su[0] if su else None,
                            "stack_qualifiers": su[1] if su else None,
                        }
                    )
                    counts["host"] += 1
            except HostKernelError as exc:
                found.unreadable.append({"file": rel, "reader": "host", "message": str(exc)})
        record: dict[str, Any] = {"file": rel, "bytes": len(data), **counts}
        if notes:
            said = list(notes)
            more = f" (+{len(said) - _NOTES} more)" if len(said) > _NOTES else ""
            record["no_source_file"] = "; ".join(said[:_NOTES]) + more
        found.files.append(record)
    usage = {}
    for log in ptxas_logs:
        usage.update(read_ptxas_log(log.read_text(encoding="utf-8", errors="replace"), str(log)))
    cuda_rows = [
        _cuda_row(rel, k, source)
        for (rel, k), source in zip(_with_spills(cuda_kernels, usage), cuda_sources, strict=True)
    ]
    if mix is not None:
        mix.attach("amdgpu", amd_rows)
        mix.attach("cuda", cuda_rows)
        found.unreadable.extend(mix.unreadable)
    found.tables = {
        "amdgpu": _frame(amd_rows, AMDGPU_COLUMNS),
        "cuda": _frame(cuda_rows, CUDA_COLUMNS),
        "host": _frame(host_rows, HOST_COLUMNS),
    }
    return found


def save_tables(found: KernelScan, folder: Path) -> dict[str, str]:
    """Write each family's table as `<family>.parquet` under `folder`; return the file names."""
    names = {}
    for family, table in found.tables.items():
        names[family] = f"{family}.parquet"
        write_parquet(folder / names[family], table)
    return names


def load_tables(folder: Path) -> dict[str, pd.DataFrame]:
    """The tables `save_tables` wrote; a family whose file is absent is an empty table."""
    columns = {"amdgpu": AMDGPU_COLUMNS, "cuda": CUDA_COLUMNS, "host": HOST_COLUMNS}
    tables = {}
    for family in FAMILIES:
        path = folder / f"{family}.parquet"
        table = pd.read_parquet(path) if path.is_file() else _frame([], columns[family])
        # Tables saved before a column existed (the instruction mix, source files) read it as absent.
        for column in columns[family]:
            if column not in table.columns:
                dtype = "string" if column in _TEXT_COLUMNS else "Int64"
                table[column] = pd.Series([pd.NA] * len(table), index=table.index, dtype=dtype)
        tables[family] = table
    return tables


def _files(root: Path, globs: Sequence[str]) -> list[tuple[Path, str]]:
    """(resolved path, path relative to root) of the regular files under root matching globs."""
    if root.is_file():
        return [(root.resolve(), root.name)]
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such file or directory")
    real_root = root.resolve()
    seen: dict[Path, str] = {}
    for dirpath, dirs, names in os.walk(real_root):
        dirs.sort()
        for name in sorted(names):
            path = Path(dirpath) / name
            rel = path.relative_to(real_root).as_posix()
            real = path.resolve()
            # A symlink into another store path is a dependency, not this arm's own file.
            if not real.is_relative_to(real_root) or not real.is_file() or real in seen:
                continue
            if any(fnmatch.fnmatchcase(rel, pattern) for pattern in globs):
                seen[real] = rel
    return list(seen.items())


def _is_linked_elf(data: bytes) -> bool:
    """An executable or shared library (ET_EXEC, ET_DYN): what an arm ships and runs."""
    if len(data) < 18 or not data.startswith(ELF_MAGIC):
        return False
    return int.from_bytes(data[16:18], "little" if data[5] == 1 else "big") in (2, 3)


def _amd_row(
    rel: str, bundle_id: str | None, origin: str, kernel: AmdKernel, source_file: str | None
) -> dict[str, Any]:
    return {
        "file": rel,
        "origin": origin,
        "bundle_id": bundle_id,
        "target": kernel.target,
        "processor": kernel.processor,
        "name": kernel.name,
        "key": base_name(kernel.name),
        "symbol": kernel.symbol,
        "vgpr_count": kernel.vgpr_count,
        "agpr_count": kernel.agpr_count,
        "sgpr_count": kernel.sgpr_count,
        "vgpr_spill_count": kernel.vgpr_spill_count,
        "sgpr_spill_count": kernel.sgpr_spill_count,
        "private_segment_fixed_size": kernel.private_segment_fixed_size,
        "group_segment_fixed_size": kernel.group_segment_fixed_size,
        "wavefront_size": kernel.wavefront_size,
        "max_flat_workgroup_size": kernel.max_flat_workgroup_size,
        "uses_dynamic_stack": kernel.uses_dynamic_stack,
        "workgroup_processor_mode": kernel.workgroup_processor_mode,
        "reqd_workgroup_size": (
            None if kernel.reqd_workgroup_size is None else ",".join(map(str, kernel.reqd_workgroup_size))
        ),
        "kernarg_segment_size": kernel.kernarg_segment_size,
        "code_object_version": kernel.code_object_version,
        # What the descriptor allocates: above .vgpr_count when a waves-per-EU bound applies.
        "allocated_vgprs": kernel.descriptor_vgpr_granules * kernel.vgpr_granule,
        "descriptor_problems": "; ".join(kernel.descriptor_mismatches()) or None,
        "source_file": source_file,
    }


def _with_spills(
    kernels: list[tuple[str, CudaKernel]], usage: dict[Any, Any]
) -> Iterable[tuple[str, CudaKernel]]:
    if not usage:
        return kernels
    attached = attach_spills([k for _, k in kernels], usage)
    return [(rel, k) for (rel, _), k in zip(kernels, attached, strict=True)]


def _cuda_row(rel: str, kernel: CudaKernel, source_file: str | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        column: getattr(kernel, column, None) for column in CUDA_COLUMNS if column not in ("file", "key")
    }
    for dims in ("max_threads", "reqntid"):  # (x, y, z) as "x,y,z", like reqd_workgroup_size
        if row[dims] is not None:
            row[dims] = ",".join(map(str, row[dims]))
    row.update(file=rel, origin=kernel.source, key=kernel.name, source_file=source_file)
    return row


def _frame(rows: list[dict[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    # Nullable dtypes keep "absent" (None) apart from 0 through a Parquet round trip.
    frame = pd.DataFrame(rows, columns=list(columns)).convert_dtypes()
    text = [c for c in _TEXT_COLUMNS if c in frame.columns]
    return frame.astype(dict.fromkeys(text, "string")) if text else frame
