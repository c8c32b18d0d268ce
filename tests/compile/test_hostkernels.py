"""Host kernels read from binaries built here by real compilers, checked against readelf."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from qualify.compile.hostkernels import (
    DEFAULT_PATTERNS,
    HostKernelError,
    fold_name,
    host_kernels,
    identifier,
    read_stack_usage,
    read_symbols,
)

SRC = Path(__file__).parent / "kernels" / "host"
C_COMPILERS = ["gcc-12", "clang-19"]
CXX_COMPILERS = {"gcc-12": "g++-12", "clang-19": "clang++-19"}


def _need(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} not installed")


def _build(cc: str, src: Path, root: Path, out: str, *flags: str, shared: bool = False) -> Path:
    """Compile src to an object (so the .su file lands next to it), move the .su under
    root/share/stack-usage, and link root/bin/out (or root/lib/out for a shared library)."""
    _need(cc)
    obj_dir = root / "obj"
    obj_dir.mkdir(parents=True, exist_ok=True)
    obj = obj_dir / (src.stem + ".o")
    pic = ["-fPIC"] if shared else []
    subprocess.run([cc, "-O2", "-fstack-usage", *pic, *flags, "-c", str(src), "-o", str(obj)], check=True)
    su_dir = root / "share" / "stack-usage"
    su_dir.mkdir(parents=True, exist_ok=True)
    shutil.move(obj.with_suffix(".su"), su_dir / (src.stem + ".su"))
    target = root / ("lib" if shared else "bin") / out
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([cc, *(["-shared"] if shared else []), str(obj), "-o", str(target)], check=True)
    obj.unlink()
    return target


def _readelf_funcs(path: Path) -> dict[tuple[str, int], int]:
    """(name, value) → size of defined sized FUNC symbols, from .symtab or else .dynsym."""
    out = subprocess.run(["readelf", "-sW", str(path)], check=True, capture_output=True, text=True).stdout
    tables = re.split(r"^Symbol table '(\.\w+)'.*$", out, flags=re.M)
    by_name = dict(zip(tables[1::2], tables[2::2], strict=True))
    text = by_name.get(".symtab", by_name.get(".dynsym", ""))
    funcs: dict[tuple[str, int], int] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 8 and f[3] == "FUNC" and f[6] != "UND" and int(f[2], 0) > 0:
            funcs[(f[7].split("@")[0], int(f[1], 16))] = int(f[2], 0)
    return funcs


def _readelf_size(path: Path, folded: str) -> int:
    return sum(size for (name, _), size in _readelf_funcs(path).items() if fold_name(name) == folded)


def _su_line(su_file: Path, name: str) -> tuple[int, str]:
    """The compiler's own line for name, read straight from the .su text."""
    for line in su_file.read_text().splitlines():
        loc, size, quals = line.split("\t")
        if loc.endswith(":" + name):
            return int(size), quals
    raise AssertionError(f"{name} not in {su_file}")


@pytest.mark.parametrize(
    ("raw", "folded"),
    [
        ("quantize_row_q8_0", "quantize_row_q8_0"),
        ("helper.constprop.0", "helper"),
        ("helper.constprop", "helper"),  # gcc's .su spelling
        ("f.isra.0", "f"),
        ("f.part.3", "f"),
        ("f.cold", "f"),
        ("f.isra.0.cold", "f"),
        ("f.constprop.0.isra.0", "f"),
        ("f.lto_priv.0", "f"),
        ("f.llvm.1234567890123", "f"),
        ("_ZN2ns1K1fEi.cold", "_ZN2ns1K1fEi"),
        ("f.constprop_not", "f.constprop_not"),
    ],
)
def test_fold_name(raw: str, folded: str) -> None:
    assert fold_name(raw) == folded


@pytest.mark.parametrize(
    ("name", "ident"),
    [
        ("ggml_vec_dot_f16", "ggml_vec_dot_f16"),
        ("_Z16ggml_vec_dot_f16iPKf", "ggml_vec_dot_f16"),
        ("_ZN2ns1K24ggml_compute_forward_addEiPf", "ggml_compute_forward_add"),
        ("_ZL3fooi", "foo"),
        (
            "_Z28ggml_compute_forward_dup_fltIt11ggml_bf16_tEvPK19ggml_compute_paramsP11ggml_tensor",
            "ggml_compute_forward_dup_flt",
        ),
        ("static int ns::K::ggml_compute_forward_add(int, float*)", "ggml_compute_forward_add"),
        ("void f(const p*, t*) [with src_t = short unsigned int; dst_t = b]", "f"),
        ("int ns::C<int>::g<float>(int) const", "g"),
        ("static constexpr bool f(const p*, t*)::<lambda(int, int)>::_FUN(int, int)", "_FUN"),
    ],
)
def test_identifier(name: str, ident: str) -> None:
    assert identifier(name) == ident


@pytest.mark.parametrize("cc", C_COMPILERS)
def test_c_executable_matches_readelf_and_su(cc: str, tmp_path: Path) -> None:
    exe = _build(cc, SRC / "ggml_like.c", tmp_path, "ggml-like")
    su_file = tmp_path / "share" / "stack-usage" / "ggml_like.su"
    kernels = host_kernels(tmp_path)
    names = [k.name for k in kernels]
    assert names == ["dequantize_row_q8_0", "ggml_vec_dot_q4_0_q8_0", "quantize_row_q8_0"]
    for k in kernels:
        assert k.binary == str(exe.resolve())
        assert k.code_size == _readelf_size(exe, k.name) > 0
        assert k.stack_bytes is not None
        assert k.stack_qualifiers == "static"
    dot = kernels[1]
    assert (dot.stack_bytes, dot.stack_qualifiers) == _su_line(su_file, "ggml_vec_dot_q4_0_q8_0")
    # The volatile float[64] is on the stack; a leaf function on x86-64 keeps up to 128 bytes of
    # it in the red zone below the stack pointer, which .su files do not count.
    assert dot.stack_bytes >= 64 * 4 - 128


@pytest.mark.parametrize("cc", C_COMPILERS)
def test_clones_fold_into_one_kernel(cc: str, tmp_path: Path) -> None:
    exe = _build(cc, SRC / "ggml_like.c", tmp_path, "ggml-like")
    (helper,) = read_symbols(exe, ("helper",))
    assert helper.name == "helper"
    assert helper.code_size == _readelf_size(exe, "helper")
    if cc.startswith("gcc"):  # gcc specialises the constant argument; clang does not
        assert len(helper.symbols) == 1
        assert re.fullmatch(r"helper\.constprop\.\d+", helper.symbols[0])
    stack = read_stack_usage([tmp_path / "share" / "stack-usage" / "ggml_like.su"])
    assert "helper" in stack  # gcc writes "helper.constprop", clang "helper"


@pytest.mark.parametrize("cc", C_COMPILERS)
def test_cxx_kernels_get_stack_usage(cc: str, tmp_path: Path) -> None:
    cxx = CXX_COMPILERS[cc]
    exe = _build(cxx, SRC / "ggml_like.cpp", tmp_path, "ggml-like-cxx")
    su_text = (tmp_path / "share" / "stack-usage" / "ggml_like.su").read_text()
    kernels = {k.name: k for k in host_kernels(tmp_path)}
    # C++ symbols stay mangled; patterns match their identifier.
    assert set(kernels) == {"_Z16ggml_vec_dot_f16iPKf", "_ZN2ns1K24ggml_compute_forward_addEiPf"}
    for k in kernels.values():
        assert k.code_size == _readelf_size(exe, k.name) > 0
    su_name = (
        "int ggml_vec_dot_f16(int, const float*)" if cc.startswith("gcc") else "_Z16ggml_vec_dot_f16iPKf"
    )
    assert su_name in su_text
    got = kernels["_Z16ggml_vec_dot_f16iPKf"]
    assert (got.stack_bytes, got.stack_qualifiers) == _su_line(
        tmp_path / "share" / "stack-usage" / "ggml_like.su", su_name
    )


@pytest.mark.parametrize("cc", C_COMPILERS)
def test_stripped_shared_library_falls_back_to_dynsym(cc: str, tmp_path: Path) -> None:
    lib = _build(cc, SRC / "ggml_like.c", tmp_path, "libggml-like.so", "-DNO_MAIN", shared=True)
    before = read_symbols(lib)
    subprocess.run(["strip", str(lib)], check=True)
    assert (
        ".symtab" not in subprocess.run(["readelf", "-SW", str(lib)], capture_output=True, text=True).stdout
    )
    after = read_symbols(lib)
    assert [k.name for k in after] == ["dequantize_row_q8_0", "ggml_vec_dot_q4_0_q8_0", "quantize_row_q8_0"]
    assert [(k.name, k.code_size) for k in after] == [(k.name, k.code_size) for k in before]
    for k in after:
        assert k.code_size == _readelf_size(lib, k.name)


@pytest.mark.parametrize("cc", C_COMPILERS)
def test_stripped_executable_yields_nothing(cc: str, tmp_path: Path) -> None:
    exe = _build(cc, SRC / "ggml_like.c", tmp_path, "ggml-like")
    subprocess.run(["strip", str(exe)], check=True)
    assert read_symbols(exe) == []
    # .su files alone must not conjure kernels: no binary function, no kernel.
    assert host_kernels(tmp_path) == []


def test_tree_without_matching_functions_is_empty(tmp_path: Path) -> None:
    _build("gcc-12", SRC / "ggml_like.c", tmp_path, "ggml-like")
    assert host_kernels(tmp_path, ("no_such_kernel_*",)) == []
    assert host_kernels(tmp_path / "share") == []  # .su files, no ELF


def test_symlinks_outside_root_and_non_elf_are_skipped(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    exe = _build("gcc-12", SRC / "ggml_like.c", outside, "ggml-like")
    root = tmp_path / "root" / "bin"
    root.mkdir(parents=True)
    (root / "ggml-like").symlink_to(exe)
    (root / "script.sh").write_text("#!/bin/sh\n")
    assert host_kernels(tmp_path / "root") == []


def test_non_elf_raises_naming_path(tmp_path: Path) -> None:
    bogus = tmp_path / "not-elf"
    bogus.write_bytes(b"#!/bin/sh\necho hi\n")
    with pytest.raises(HostKernelError, match="not-elf"):
        read_symbols(bogus)
    with pytest.raises(HostKernelError, match="missing"):
        read_symbols(tmp_path / "missing")


def test_su_parsing_keeps_largest_frame(tmp_path: Path) -> None:
    su = tmp_path / "x.su"
    su.write_text(
        "a.c:3:5:ggml_vec_dot_x\t16\tstatic\n"
        "b.c:9:ggml_vec_dot_x\t48\tdynamic,bounded\n"
        "garbage line\n"
        "c.cpp:1:2:void ns::quantize_y(int)\t24\tdynamic\n"
    )
    assert read_stack_usage([su]) == {
        "ggml_vec_dot_x": (48, "dynamic,bounded"),
        "quantize_y": (24, "dynamic"),
    }


@pytest.mark.nix
@pytest.mark.example
def test_real_llama_bench(example_outs: dict[str, Path]) -> None:
    """The example's pinned arm (llama.cpp built by gcc 12 through nix, with its .su files)."""
    store = example_outs["pinned"]
    bench = store / "bin" / "llama-bench"
    su_root = store / "share" / "stack-usage"
    kernels = [k for k in host_kernels(store, DEFAULT_PATTERNS, su_root) if k.binary == str(bench)]
    dots = [k for k in kernels if k.name.startswith("ggml_vec_dot_")]
    assert dots and all(k.code_size > 0 for k in dots)
    q4 = next(k for k in dots if k.name == "ggml_vec_dot_q4_0_q8_0")
    assert q4.code_size == _readelf_size(bench, q4.name)
    assert any(k.stack_bytes is not None for k in dots)
