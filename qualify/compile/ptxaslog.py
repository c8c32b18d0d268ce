"""Spill bytes and other per-function figures from saved `ptxas -v` output.

A cubin records registers, stack and memory sizes (`qualify.compile.cubin`) but not spill bytes:
only ptxas's verbose report has them. A build captures it with `nvcc -Xptxas -v` or
`nvcc --resource-usage` (stderr). Lines, as ptxas 13.0 writes them::

    ptxas info    : 0 bytes gmem                          (first line of each ptxas run)
    ptxas info    : Compiling entry function '_Z9acc_spillPKfPfi' for 'sm_90'
    ptxas info    : Function properties for _Z9acc_spillPKfPfi
        920 bytes stack frame, 1928 bytes spill stores, 2160 bytes spill loads
    ptxas info    : Used 32 registers, used 0 barriers, 920 bytes cumulative stack size

A device function has a "Function properties" block but no "Compiling entry function" or
"Used" line; it belongs to the architecture of the entries of its run. Code compiled without
the ABI (module-scope `.local` PTX) has no "Function properties" block; its "Used" line
lists `N bytes lmem`. Older ptxas also lists `N bytes cmem[B]` there.

Contract of `read_ptxas_log(text, where)`: a map (arch as ptxas names it, mangled name) ->
`PtxasUsage`. Lines that carry figures must parse completely, or `PtxasLogError` names
`where`, the line number and what was expected; other lines (warnings, nvcc and host compiler
output, "Compile time", nvlink's report, which has no spill figures) are skipped. Text with no
ptxas report at all is an error. A name compiled twice for one arch (one template in two
translation units) keeps the worst value of each figure. The arch of a device function whose
run compiled no entry is unknown and recorded as "".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from qualify.compile.cubin import CudaKernel

__all__ = ["PtxasLogError", "PtxasUsage", "attach_spills", "read_ptxas_log"]

_INFO = re.compile(r"^ptxas info\s*:\s*")
_RUN_START = re.compile(r"^\d+ bytes gmem\b")
_ENTRY = re.compile(r"^Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'\s*$")
_PROPERTIES = re.compile(r"^Function properties for (?P<name>\S+)\s*$")
_FRAME = re.compile(r"^\s+(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads\s*$")
_USED = re.compile(r"^Used (\d+) registers(?:, (?P<rest>.*?))?\s*$")
# Items of the "Used" line after the register count: (pattern, PtxasUsage field).
_USED_ITEMS = (
    (re.compile(r"^used (\d+) barriers$"), "barriers"),
    (re.compile(r"^(\d+) bytes smem$"), "shared"),
    (re.compile(r"^(\d+) bytes lmem$"), "local"),
    (re.compile(r"^(\d+) bytes cumulative stack size$"), "cumulative_stack"),
    (re.compile(r"^(\d+) bytes cmem\[(\d+)\]$"), "constant"),
    (re.compile(r"^(\d+) (?:textures|samplers|surfaces)$"), ""),  # older ptxas; not kept
)
_ARCH_SUFFIX = re.compile(r"(?<=\d)[a-z]+$")  # sm_90a, sm_100f: the cubin says sm_90, sm_100


class PtxasLogError(ValueError):
    """A ptxas report line could not be parsed; the message names the file and line."""


@dataclass(frozen=True)
class PtxasUsage:
    """One function's figures from a ptxas report; None where the report has no such figure.

    `constant` holds (bank, bytes) pairs; `registers`, `barriers`, `shared`, `local`,
    `cumulative_stack` and `constant` come from the "Used" line, which only entries have.
    """

    arch: str
    name: str
    entry: bool
    stack_frame: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    registers: int | None = None
    barriers: int | None = None
    shared: int | None = None
    local: int | None = None
    cumulative_stack: int | None = None
    constant: tuple[tuple[int, int], ...] = ()
    where: str = ""


def read_ptxas_log(text: str, where: str) -> dict[tuple[str, str], PtxasUsage]:
    """The functions of a saved ptxas report (`where` names it in errors), keyed by (arch,
    mangled name); see the module docstring."""
    result: dict[tuple[str, str], PtxasUsage] = {}
    run: list[PtxasUsage] = []  # this run's functions; device functions get the arch at its end
    run_arch = ""
    current: int | None = None  # index in `run` of the last "Compiling entry function"
    reports = 0

    def flush() -> None:
        for usage in run:
            item = usage if usage.entry else replace(usage, arch=run_arch)
            key = (item.arch, item.name)
            result[key] = _worst(result[key], item) if key in result else item
        run.clear()

    lines = text.splitlines()
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        info = _INFO.match(line)
        if info is None:
            continue
        reports += 1
        body, at = line[info.end() :], f"{where}:{number}"
        if _RUN_START.match(body):
            flush()
            run_arch, current = "", None
        elif match := _ENTRY.match(body):
            run_arch = run_arch or match["arch"]
            current = len(run)
            run.append(PtxasUsage(match["arch"], match["name"], entry=True, where=at))
        elif match := _PROPERTIES.match(body):
            following = lines[number] if number < len(lines) else ""
            frame = _FRAME.match(following)
            if frame is None:
                raise PtxasLogError(
                    f"{where}:{number + 1}: expected '<n> bytes stack frame, <n> bytes spill stores, "
                    f"<n> bytes spill loads' after 'Function properties for {match['name']}', "
                    f"found {following!r}"
                )
            number += 1
            stack_frame, stores, loads = (int(g) for g in frame.groups())
            if current is not None and run[current].name == match["name"]:
                run[current] = replace(
                    run[current], stack_frame=stack_frame, spill_stores=stores, spill_loads=loads
                )
            else:
                run.append(PtxasUsage("", match["name"], False, stack_frame, stores, loads, where=at))
        elif match := _USED.match(body):
            if current is None:
                raise PtxasLogError(
                    f"{at}: 'Used ... registers' without a preceding 'Compiling entry function'"
                )
            run[current] = _used(run[current], int(match[1]), match["rest"] or "", at)
        elif body.startswith(("Compiling entry function", "Function properties", "Used ")):
            raise PtxasLogError(f"{at}: cannot parse ptxas line {line.strip()!r}")
    flush()
    if not reports:
        raise PtxasLogError(f"{where}: no 'ptxas info' line: not the output of ptxas -v / --resource-usage")
    return result


def _used(entry: PtxasUsage, registers: int, rest: str, at: str) -> PtxasUsage:
    """The entry with the figures of its "Used N registers, ..." line."""
    found: dict[str, int] = {}
    constant = list(entry.constant)
    for item in filter(None, (part.strip() for part in rest.split(","))):
        for pattern, name in _USED_ITEMS:
            if match := pattern.match(item):
                if name == "constant":
                    constant.append((int(match[2]), int(match[1])))
                elif name:
                    found[name] = int(match[1])
                break
        else:
            raise PtxasLogError(f"{at}: unknown item {item!r} in the 'Used ... registers' line")
    return replace(
        entry,
        registers=registers,
        barriers=found.get("barriers"),
        shared=found.get("shared"),
        local=found.get("local"),
        cumulative_stack=found.get("cumulative_stack"),
        constant=tuple(constant),
    )


_FIGURES = (
    "stack_frame",
    "spill_stores",
    "spill_loads",
    "registers",
    "barriers",
    "shared",
    "local",
    "cumulative_stack",
)


def _worst(old: PtxasUsage, new: PtxasUsage) -> PtxasUsage:
    """Per figure, the larger of two reports of one function (None counts as absent)."""
    merged = old
    for name in _FIGURES:
        a, b = getattr(old, name), getattr(new, name)
        merged = replace(merged, **{name: b if a is None else a if b is None else max(a, b)})
    banks = dict(old.constant)
    for bank, size in new.constant:
        banks[bank] = max(size, banks.get(bank, size))
    return replace(merged, entry=old.entry or new.entry, constant=tuple(sorted(banks.items())))


def attach_spills(
    kernels: Iterable[CudaKernel], usage: Mapping[tuple[str, str], PtxasUsage]
) -> list[CudaKernel]:
    """`kernels` with spill_store_bytes / spill_load_bytes from `usage`, matched by target and
    name. The arch suffix is ignored (ptxas says sm_90a where the cubin says sm_90); kernels the
    report does not name, or names without a "Function properties" block, are left as they are.
    """
    index: dict[tuple[str, str], PtxasUsage] = {}
    for (arch, name), item in usage.items():
        key = (_ARCH_SUFFIX.sub("", arch), name)
        index[key] = _worst(index[key], item) if key in index else item
    result = []
    for kernel in kernels:
        found = index.get((_ARCH_SUFFIX.sub("", kernel.target), kernel.name))
        if found is None or found.spill_stores is None:
            result.append(kernel)
        else:
            result.append(
                replace(kernel, spill_store_bytes=found.spill_stores, spill_load_bytes=found.spill_loads)
            )
    return result
