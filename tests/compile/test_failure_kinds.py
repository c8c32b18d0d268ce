"""What a failing kernel is said to do is what its reasons show.

Before: a kernel failing for new spills whose occupancy went up (an INFO reason "occupancy 5 →
16 waves") was counted among the kernels that "lose occupancy", because every reason starting
with "occupancy" was taken for a drop."""

from __future__ import annotations

from qualify.compile.diff import KernelDiff
from qualify.compile.failurekinds import failure_kinds


def kernel(*reasons: str) -> KernelDiff:
    return KernelDiff("amdgpu", "gfx1100", "k", "FAIL", reasons, {}, {})


def test_an_occupancy_gain_beside_a_spill_is_not_a_loss() -> None:
    assert failure_kinds(kernel("VGPR spills 0 → 12 (new)", "occupancy 5 → 16 waves per SIMD")) == [
        "spill more"
    ]


def test_an_occupancy_drop_is_a_loss() -> None:
    kinds = failure_kinds(
        kernel("VGPR spills 0 → 12 (new)", "occupancy 16 → 8 waves per SIMD (limited by vgpr)")
    )
    assert kinds == ["spill more", "lose occupancy"]
