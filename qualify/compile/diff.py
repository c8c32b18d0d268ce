"""Compare the kernels of two builds: which changed, how, and how much that matters.

Contract of `diff(pinned, candidate, limits)`: both sides are the per-family tables of
`qualify.compile.scan`; the kernels of the two are matched, each by its worst copy per figure
(`qualify.compile.matching`), and each pair judged by the rules below.

Each result carries a severity and the reasons for it:

- FAIL: a GPU kernel missing from the candidate; VGPR spills new or grown (CUDA: spill bytes);
  scratch (CUDA: stack frame, local memory) new or grown; wave size changed; dynamic stack newly
  on; occupancy dropped; LDS past 64 KiB; and from the instruction mix (`qualify.compile.mixdiff`,
  which also WARNs on code growth and lists class shifts as INFO), matrix instructions lost and
  scratch loads and stores gained.
- ERROR: the candidate's kernel descriptor disagrees with its metadata (the figures cannot be
  trusted).
- WARN: VGPR/AGPR/register growth or LDS/shared growth that keeps occupancy; SGPR spills new or
  grown (they go to VGPR lanes; a spill to memory shows as scratch); occupancy not modelled for
  the target; every host-kernel change past the host limits (different compilers inline
  differently, so host kernels never fail a build).
- INFO: SGPR changes on GFX10 and later (not an occupancy limit there), improvements, kernels
  new in the candidate, target feature changes (xnack, sramecc).
- stub: a GPU kernel whose code does no work in both builds, or in the one that has it
  (`qualify.compile.stubs`): set apart, never judged. Real code in pinned that is a stub in the
  candidate FAILs; a stub in pinned that is real code in the candidate WARNs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pandas as pd

from qualify.compile.figures import AmdFigures, CudaFigures, GpuFigures, HostFigures
from qualify.compile.instmix import Mix
from qualify.compile.kind import KIND
from qualify.compile.matching import aggregate, concretize
from qualify.compile.mixdiff import mix_findings
from qualify.compile.stubs import stub_rule

SEVERITIES = ("FAIL", "ERROR", "WARN", "INFO", "same", "stub")
LDS_LIMIT = 64 * 1024  # the most one workgroup can address on every AMDGPU target


_DEFAULTS = KIND.limit_defaults()


@dataclass(frozen=True)
class Limits:
    """The plan's limits for this comparison (names as in the plan, without max_)."""

    # The defaults are the kind's (`qualify.compile.kind.LIMITS`, shown by `qualify kinds`).
    spill_growth: float = _DEFAULTS["max_spill_growth"]  # spill count (AMD) or bytes (CUDA)
    scratch_growth_pct: float = _DEFAULTS["max_scratch_growth_pct"]
    occupancy_drop: float = _DEFAULTS["max_occupancy_drop"]  # waves per SIMD (AMD), warps per SM (CUDA)
    host_code_growth_pct: float = _DEFAULTS["max_host_code_growth_pct"]  # past it, a host kernel WARNs
    host_stack_growth_pct: float = _DEFAULTS["max_host_stack_growth_pct"]
    # The instruction mix (`qualify.compile.mixdiff`).
    scratch_instruction_growth: float = _DEFAULTS["max_scratch_instruction_growth"]
    code_growth_pct: float = _DEFAULTS["max_code_growth_pct"]
    class_shift_pct: float = _DEFAULTS["min_class_shift_pct"]
    cuda_block_size: int = 256  # threads per block when a CUDA kernel does not declare it

    @classmethod
    def from_plan(cls, limits: Mapping[str, float], cuda_block_size: int = 256) -> Limits:
        def get(name: str, default: float, prefix: str = "max_") -> float:
            return float(limits.get(f"{prefix}{name}", default))

        return cls(
            spill_growth=get("spill_growth", cls.spill_growth),
            scratch_growth_pct=get("scratch_growth_pct", cls.scratch_growth_pct),
            occupancy_drop=get("occupancy_drop", cls.occupancy_drop),
            host_code_growth_pct=get("host_code_growth_pct", cls.host_code_growth_pct),
            host_stack_growth_pct=get("host_stack_growth_pct", cls.host_stack_growth_pct),
            scratch_instruction_growth=get("scratch_instruction_growth", cls.scratch_instruction_growth),
            code_growth_pct=get("code_growth_pct", cls.code_growth_pct),
            class_shift_pct=get("class_shift_pct", cls.class_shift_pct, "min_"),
            cuda_block_size=cuda_block_size,
        )


@dataclass(frozen=True)
class KernelDiff:
    """One kernel in both builds: the worst copy's figures per side (None when absent)."""

    family: str
    target: str
    key: str
    severity: str
    reasons: tuple[str, ...]
    pinned: dict[str, Any] | None
    candidate: dict[str, Any] | None

    @property
    def rank(self) -> int:
        return SEVERITIES.index(self.severity)

    @property
    def source_files(self) -> tuple[str, ...]:
        """The source files (translation units) the candidate's copies were compiled from, the
        pinned build's for a kernel missing from the candidate; empty where none is known."""
        side = self.candidate if self.candidate is not None else self.pinned
        return tuple(side.get("source_files") or ()) if side is not None else ()


def diff(
    pinned: Mapping[str, pd.DataFrame], candidate: Mapping[str, pd.DataFrame], limits: Limits
) -> list[KernelDiff]:
    """Every kernel of either side, most severe first, then by family, target and name."""
    results: list[KernelDiff] = []
    amd = {
        "pinned": concretize(pinned["amdgpu"], candidate["amdgpu"]),
        "candidate": concretize(candidate["amdgpu"], pinned["amdgpu"]),
    }
    for family, compare in (("amdgpu", _compare_amd), ("cuda", _compare_cuda), ("host", _compare_host)):
        block = limits.cuda_block_size
        before = aggregate(family, amd["pinned"] if family == "amdgpu" else pinned[family], block)
        after = aggregate(family, amd["candidate"] if family == "amdgpu" else candidate[family], block)
        for target, key in sorted(set(before) | set(after)):
            p, c = before.get((target, key)), after.get((target, key))
            severity, reasons = compare(p, c, limits)
            results.append(KernelDiff(family, target, key, severity, tuple(reasons), p, c))
    results.sort(key=lambda d: (d.rank, d.family, d.target, d.key))
    return results


def _grew(before: Any, after: Any) -> bool:
    return before is not None and after is not None and after > before


def _change(name: str, before: Any, after: Any) -> str:
    return f"{name} {before} → {after}"


def _missing_or_new(p: dict[str, Any] | None, c: dict[str, Any] | None, gpu: bool) -> tuple[str, list[str]]:
    if c is None:
        if gpu:
            return "FAIL", ["missing from the candidate"]
        return "WARN", ["not a function in the candidate (inlined or removed)"]
    return "INFO", ["new in the candidate"]


def _occupancy_rules(
    p: GpuFigures, c: GpuFigures, limits: Limits, unit: str
) -> tuple[bool, list[tuple[str, str]]]:
    """(occupancy known on both sides, findings as (severity, reason))."""
    found: list[tuple[str, str]] = []
    po, co = p.occupancy, c.occupancy
    if po is None or co is None:
        return False, [("WARN", f"occupancy not modelled for {c.target or p.target}")]
    if co < po - limits.occupancy_drop:
        found.append(("FAIL", f"occupancy {po} → {co} {unit} (limited by {c.occupancy_limiter})"))
    elif co > po:
        found.append(("INFO", f"occupancy {po} → {co} {unit}"))
    return True, found


def _growth_note(known: bool, occupancy: list[tuple[str, str]]) -> str:
    """What a resource's growth did to occupancy: kept it, or unknown. Nothing when occupancy
    dropped: the occupancy reason already says so and names what limits it now."""
    if not known:
        return " (occupancy unknown)"
    if any(severity == "FAIL" for severity, _ in occupancy):
        return ""
    return " (keeps occupancy)"


def _decide(found: list[tuple[str, str]]) -> tuple[str, list[str]]:
    if not found:
        return "same", []
    severity = min((s for s, _ in found), key=SEVERITIES.index)
    ordered = sorted(found, key=lambda f: SEVERITIES.index(f[0]))
    return severity, [reason for _, reason in ordered]


def _scratch_rule(name: str, before: Any, after: Any, limits: Limits) -> tuple[str, str] | None:
    if before is None or after is None or after <= before:
        return None
    if before == 0:
        return ("FAIL", f"{name} 0 → {after} B (new)")
    if (after - before) * 100 > limits.scratch_growth_pct * before:
        return ("FAIL", f"{name} {before} → {after} B (+{(after - before) * 100 / before:.0f} %)")
    return ("WARN", f"{name} {before} → {after} B")


Rule = tuple[str, str]  # (severity, reason)
F = TypeVar("F", bound=GpuFigures)


def _compare_gpu(
    pinned: dict[str, Any] | None,
    candidate: dict[str, Any] | None,
    limits: Limits,
    figures: Callable[[dict[str, Any]], F],
    rules: Callable[[F, F, Limits], list[Rule]],
) -> tuple[str, list[str]]:
    """A GPU kernel of both builds: a stub set apart, a kernel on one side only, else the
    family's `rules` on its figures and the instruction mix's."""
    stub = stub_rule(pinned, candidate)
    if stub is not None:
        return stub
    if pinned is None or candidate is None:
        return _missing_or_new(pinned, candidate, gpu=True)
    return _decide(rules(figures(pinned), figures(candidate), limits) + _mix(pinned, candidate, limits))


def _resource_rules(
    p: GpuFigures,
    c: GpuFigures,
    limits: Limits,
    unit: str,
    grown: list[tuple[str, Any, Any]],
    notes: list[Rule],
    shrunk: list[tuple[str, Any, Any]],
) -> list[Rule]:
    """What every GPU family judges alike: occupancy, then each of the `grown` resources that
    grew (WARN, with what it did to occupancy), the family's `notes`, and each of the `shrunk`
    that shrank (INFO). (label, pinned's, candidate's) each."""
    known, found = _occupancy_rules(p, c, limits, unit)
    growth = _growth_note(known, found)
    found += [
        ("WARN", f"{_change(label, before, after)}{growth}")
        for label, before, after in grown
        if _grew(before, after)
    ]
    found += notes
    found += [
        ("INFO", _change(label, before, after)) for label, before, after in shrunk if _grew(after, before)
    ]
    return found


def _amd_rules(p: AmdFigures, c: AmdFigures, limits: Limits) -> list[Rule]:
    found: list[Rule] = []
    if p.wavefront_sizes != c.wavefront_sizes:
        found.append(("FAIL", f"wave size {p.wavefront_size} → {c.wavefront_size}"))
    if c.vgpr_spill_count > p.vgpr_spill_count + limits.spill_growth:
        new = " (new)" if p.vgpr_spill_count == 0 else ""
        found.append(("FAIL", _change("VGPR spills", p.vgpr_spill_count, c.vgpr_spill_count) + new))
    if c.sgpr_spill_count > p.sgpr_spill_count:
        found.append(("WARN", _change("SGPR spills", p.sgpr_spill_count, c.sgpr_spill_count)))
    rule = _scratch_rule("scratch", p.private_segment_fixed_size, c.private_segment_fixed_size, limits)
    if rule:
        found.append(rule)
    if c.uses_dynamic_stack and not p.uses_dynamic_stack:
        found.append(("FAIL", "dynamic stack newly on"))
    if c.group_segment_fixed_size > LDS_LIMIT:
        found.append(("FAIL", f"LDS {c.group_segment_fixed_size} B exceeds 64 KiB"))
    if c.descriptor_problems:
        found.append(("ERROR", f"kernel descriptor disagrees with metadata: {c.descriptor_problems}"))
    notes: list[Rule] = []
    if _grew(p.group_segment_fixed_size, c.group_segment_fixed_size):
        notes.append(("WARN", f"{_change('LDS', p.group_segment_fixed_size, c.group_segment_fixed_size)} B"))
    if p.sgpr_count != c.sgpr_count:
        # From GFX10 on, SGPRs are not an occupancy limit; before, occupancy covers them.
        notes.append(("INFO", _change("SGPRs", p.sgpr_count, c.sgpr_count)))
    found += _resource_rules(
        p,
        c,
        limits,
        "waves/SIMD",
        grown=[("VGPRs", p.vgpr_count, c.vgpr_count), ("AGPRs", p.agpr_count, c.agpr_count)],
        notes=notes,
        shrunk=[
            ("VGPRs", p.vgpr_count, c.vgpr_count),
            ("VGPR spills", p.vgpr_spill_count, c.vgpr_spill_count),
        ],
    )
    if p.target != c.target:
        found.append(("INFO", f"target {p.target} → {c.target}"))
    return found


def _mix(p: dict[str, Any], c: dict[str, Any], limits: Limits) -> list[Rule]:
    return mix_findings(
        Mix.of(p),
        Mix.of(c),
        limits.scratch_instruction_growth,
        limits.code_growth_pct,
        limits.class_shift_pct,
    )


def _cuda_rules(p: CudaFigures, c: CudaFigures, limits: Limits) -> list[Rule]:
    found: list[Rule] = []
    for label, before, after in (
        ("spill stores", p.spill_store_bytes, c.spill_store_bytes),
        ("spill loads", p.spill_load_bytes, c.spill_load_bytes),
    ):
        if before is not None and after is not None and after > before + limits.spill_growth:
            new = " (new)" if before == 0 else ""
            found.append(("FAIL", f"{_change(label, before, after)} B{new}"))
    for label, before, after in (("stack frame", p.stack, c.stack), ("local memory", p.local, c.local)):
        rule = _scratch_rule(label, before, after, limits)
        if rule:
            found.append(rule)
    resources = [("registers", p.registers, c.registers), ("shared memory", p.shared, c.shared)]
    return found + _resource_rules(p, c, limits, "warps/SM", grown=resources, notes=[], shrunk=resources)


def _compare_amd(
    pinned: dict[str, Any] | None, candidate: dict[str, Any] | None, limits: Limits
) -> tuple[str, list[str]]:
    return _compare_gpu(pinned, candidate, limits, AmdFigures.of, _amd_rules)


def _compare_cuda(
    pinned: dict[str, Any] | None, candidate: dict[str, Any] | None, limits: Limits
) -> tuple[str, list[str]]:
    return _compare_gpu(pinned, candidate, limits, CudaFigures.of, _cuda_rules)


def _compare_host(
    pinned: dict[str, Any] | None, candidate: dict[str, Any] | None, limits: Limits
) -> tuple[str, list[str]]:
    if pinned is None or candidate is None:
        return _missing_or_new(pinned, candidate, gpu=False)
    p, c = HostFigures.of(pinned), HostFigures.of(candidate)
    found: list[tuple[str, str]] = []
    for label, before, after, pct in (
        ("code", p.code_size, c.code_size, limits.host_code_growth_pct),
        ("stack frame", p.stack_bytes, c.stack_bytes, limits.host_stack_growth_pct),
    ):
        if before is None or after is None or before == after:
            continue
        severity = "WARN" if after > before and (after - before) * 100 > pct * max(before, 1) else "INFO"
        found.append((severity, f"{_change(label, before, after)} B"))
    if "dynamic" in (c.stack_qualifiers or "") and "dynamic" not in (p.stack_qualifiers or ""):
        found.append(("WARN", "stack frame newly dynamic"))
    return _decide(found)
