"""`kernel-resources`: every kernel's registers, spills, scratch, LDS and occupancy, per build.

Measures: per role, the kernels in the arm's own files (`root`, default its out path, narrowed
by `paths` globs): AMDGPU code objects (plain, in offload bundles, compressed bundles, HIP fat
binaries, `.llvm.offloading`, archives), CUDA cubins (plain or in fatbins, with spill bytes from
`ptxas_logs`), and host functions matching `host_patterns` with their `-fstack-usage` frames.
With a disassembler (`objdump`: the toolchain's llvm-objdump; `cuobjdump`), every GPU kernel's
instruction mix is read too (`qualify.compile.instmix`: counts per class and code size), both
builds decoded by the one tool, the candidate's. Each family's table is saved as Parquet in the
role's folder, and the comparison (with the plan's limits at measuring time) as
`diff.parquet` in the check's folder. No GPU, ROCm or CUDA
runtime is needed: the files are read, never run.

Verdict (the rules of `qualify.compile.diff`, applied by the judge to the saved tables):
- FAIL: a GPU kernel missing from the candidate, VGPR spills or CUDA spill bytes new or grown,
  scratch / stack frame / local memory new or grown past `max_scratch_growth_pct`, a wave-size
  change, dynamic stack newly on, an occupancy drop past `max_occupancy_drop`, LDS past 64 KiB,
  a kernel that lost all its matrix instructions, scratch loads and stores grown past
  `max_scratch_instruction_growth`; no kernel found in a role, or none of a family the plan
  `require`s (nothing was measured).
- ERROR: a role could not be scanned, a file that holds device code could not be read, or a
  candidate kernel descriptor disagrees with its metadata.
- WARN: register or LDS growth that keeps occupancy, SGPR spills, occupancy not modelled for a
  target, GPU code grown past `max_code_growth_pct`, host kernels changed past the host limits
  (never more than WARN: inlining differs between compilers legitimately).
- PASS otherwise; SGPR changes on GFX10+, improvements and instruction-class shifts past
  `min_class_shift_pct` are listed, not judged.
- Stubs, GPU kernels whose code does no work (ggml's `NO_DEVICE_CODE` for a type the target does
  not build: it only calls a function that prints and traps; `qualify.compile.stubs`), are set
  apart and counted per side, never judged; real code in pinned that the candidate builds as a
  stub FAILs, a stub in pinned that is real code in the candidate WARNs.

Beside the verdict, what goes with it (`qualify.compile.causes`): for FAIL and WARN, which
instruction-mix and resource changes the kernels that end so show more often than the others
(true16 high-half operands appearing, packed-16 and VALU share shifts, matrix instructions lost,
scratch traffic, code, SGPR and VGPR growth), counted both ways over the kernels that are not
stubs, with Fisher's exact test; the reason names the strongest change of the mix that the
rules do not read themselves. An association, never proof of a cause. Then the kernels by
source file (`qualify.compile.bysource`): per translation unit the candidate's kernels were
compiled from, where the files say it (`qualify.compile.sourcefiles`), how many FAIL and WARN.

What it cannot prove: figures are static. Occupancy is an estimate at the kernel's declared
(or maximum) workgroup size without dynamic LDS; spills a kernel never executes still count;
a kernel compiled at run time (JIT, Triton) is not in the files and is not seen.
"""

from __future__ import annotations

from qualify.checks.base import CheckKind, Limit
from qualify.compile.params import CompileParams
from qualify.core.ranges import NON_NEGATIVE

#: The limits of `qualify.compile.diff.Limits`, as the plan names them, with the defaults it
#: judges by.
LIMITS = (
    Limit(
        "max_spill_growth",
        NON_NEGATIVE,
        0,
        help="spills (AMD) or spill bytes (CUDA) a kernel may gain",
    ),
    Limit("max_scratch_growth_pct", NON_NEGATIVE, 0, help="% a kernel's scratch or stack frame may grow"),
    Limit(
        "max_occupancy_drop",
        NON_NEGATIVE,
        0,
        help="waves per SIMD (AMD) or warps per SM (CUDA) a kernel may lose",
    ),
    Limit(
        "max_host_code_growth_pct",
        NON_NEGATIVE,
        50,
        help="% a host kernel's code may grow before it WARNs",
    ),
    Limit(
        "max_host_stack_growth_pct",
        NON_NEGATIVE,
        25,
        help="% a host kernel's stack frame may grow before it WARNs",
    ),
    Limit(
        "max_scratch_instruction_growth",
        NON_NEGATIVE,
        0,
        help="scratch (CUDA: local) load and store instructions a GPU kernel may gain",
    ),
    Limit("max_code_growth_pct", NON_NEGATIVE, 25, help="% a GPU kernel's code may grow before it WARNs"),
    Limit(
        "min_class_shift_pct",
        NON_NEGATIVE,
        5,
        help="points a class's share of a kernel's instructions must move to be listed (INFO)",
    ),
)

KIND = CheckKind(
    name="kernel-resources",
    summary="per-kernel registers, spills, scratch, LDS and occupancy of both builds; no regression",
    params=CompileParams.declared(),
    needs_pinned=lambda _spec: "its judgement is the per-kernel diff against the pinned build",
    verdict_rules=(
        "FAIL on a missing GPU kernel, new or grown spills or scratch, a wave-size change, dynamic "
        "stack newly on, an occupancy drop, lost matrix instructions, new scratch loads and "
        "stores, or no kernels found; WARN on register or LDS growth that keeps occupancy, on "
        "GPU code growth and on host-kernel changes; ERROR when files could not be read. Stubs (kernels "
        "whose code does no work) are set apart, never judged, and FAIL when real code becomes one"
    ),
    limits=LIMITS,
)
