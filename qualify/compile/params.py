"""The `kernel-resources` kind's parameters, declared once (`qualify.checks.kindparams`): the
plan's names, types, defaults, ranges and help, and the typed value `measure` and `judge` read
them through."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.kindparams import KindParams, param
from qualify.core.ranges import Range

#: Host functions compared by default: ggml's vector dot products, per-op forward passes and
#: quantizers (llama.cpp's CPU kernels); also `qualify kernels`' default.
DEFAULT_PATTERNS: tuple[str, ...] = (
    "ggml_vec_dot_*",
    "ggml_compute_forward_*",
    "quantize_*",
    "dequantize_row_*",
)


@dataclass(frozen=True)
class CompileParams(KindParams):
    """A `kernel-resources` check's parameters."""

    root: str = param("{out}", help="where the arm's kernels are (a directory or a file)")
    paths: tuple[str, ...] = param(("*",), help="globs relative to root that narrow the files read")
    host_patterns: tuple[str, ...] = param(DEFAULT_PATTERNS, help="host function globs ([] for none)")
    stack_usage: str | None = param(None, help="-fstack-usage .su files (default: {root}/share/stack-usage)")
    ptxas_logs: tuple[str, ...] = param((), help="saved `ptxas -v` outputs (CUDA spill bytes)")
    require: tuple[str, ...] = param((), help="families that must have kernels: amdgpu, cuda, host")
    objdump: str = param(
        "auto",
        help="AMDGPU disassembler for the instruction mix, run for both builds with the "
        'candidate\'s values (auto: llvm-objdump on PATH; "": no mix)',
    )
    cuobjdump: str = param(
        "auto", help="CUDA disassembler for the instruction mix, as objdump (auto: cuobjdump on PATH)"
    )
    cuda_block_size: int = param(
        256, help="threads per block for undeclared CUDA kernels", allowed=Range(1, 1024)
    )
