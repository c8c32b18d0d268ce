"""Store-path parsing, Nix version order and closure diffs follow how nix names and orders store paths."""

from __future__ import annotations

import functools
import hashlib

import pandas as pd
import pytest

from qualify.build.closure import (
    CHANGE_ORDER,
    COLUMNS,
    Package,
    compare_versions,
    diff_closures,
    diff_summary,
    package_of,
    parse_drv_name,
    pep440_order,
    split_output,
    store_name,
)

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def sp(name: str, seed: str = "") -> str:
    """A fake store path; a different seed gives a different hash for the same name."""
    digest = hashlib.sha256((seed + name).encode()).digest()
    return "/nix/store/" + "".join(_ALPHABET[b % 36] for b in digest[:32]) + "-" + name


def pkg(name: str, size: int | None = 100, seed: str = "", deriver: str | None = None) -> Package:
    return package_of(sp(name, seed), deriver=deriver, size=size)


def test_store_name_strips_hash_and_keeps_drv() -> None:
    assert store_name(sp("clang-20.0.0-rocm-lib")) == "clang-20.0.0-rocm-lib"
    assert store_name(sp("clr-7.2.3.drv")) == "clr-7.2.3.drv"
    with pytest.raises(ValueError, match="not a Nix store path"):
        store_name("/tmp/clang-20.0.0")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("rocblas-gfx1151-7.1.1", ("rocblas-gfx1151", "7.1.1")),
        ("clang-20.0.0-rocm-lib", ("clang", "20.0.0-rocm-lib")),
        ("rocm-toolchain", ("rocm-toolchain", "")),
        ("python3.13-torch-2.11.0", ("python3.13-torch", "2.11.0")),
        ("clr-7.2.3-icd", ("clr", "7.2.3-icd")),
        # A trailing dash is not followed by anything, so it does not split.
        ("foo-", ("foo-", "")),
        ("apache-httpd-2.0.48", ("apache-httpd", "2.0.48")),
    ],
)
def test_parse_drv_name_matches_builtins(name: str, expected: tuple[str, str]) -> None:
    assert parse_drv_name(name) == expected


def test_split_output_with_deriver() -> None:
    assert split_output("clr-7.2.3-icd", "clr-7.2.3") == ("clr-7.2.3", "icd")
    assert split_output("clr-7.2.3", "clr-7.2.3") == ("clr-7.2.3", "out")
    # The deriver decides even for suffixes the fallback would not know.
    assert split_output("clang-20.0.0-rocm-weird", "clang-20.0.0-rocm") == ("clang-20.0.0-rocm", "weird")


def test_split_output_without_deriver_only_strips_known_outputs() -> None:
    assert split_output("clang-20.0.0-rocm", None) == ("clang-20.0.0-rocm", "out")
    assert split_output("llvm-20.0.0-rocm-lib", None) == ("llvm-20.0.0-rocm", "lib")
    assert split_output("glibc-2.40-66-lib64", None) == ("glibc-2.40-66", "lib64")
    assert split_output("rocm-toolchain", None) == ("rocm-toolchain", "out")
    # A deriver that does not match the name falls back to the regex too.
    assert split_output("clr-7.2.3-icd", "hip-7.2.3") == ("clr-7.2.3", "icd")


def test_package_of_outputs_and_drvs() -> None:
    icd = package_of(sp("clr-7.2.3-icd"), deriver=sp("clr-7.2.3.drv"), size=42)
    assert (icd.pname, icd.version, icd.output, icd.size) == ("clr", "7.2.3", "icd", 42)
    rocm_clang = package_of(sp("clang-20.0.0-rocm"))
    assert (rocm_clang.pname, rocm_clang.version, rocm_clang.output) == ("clang", "20.0.0-rocm", "out")
    drv = package_of(sp("rocblas-gfx1151-7.1.1.drv"))
    assert (drv.pname, drv.version, drv.output) == ("rocblas-gfx1151", "7.1.1", "drv")
    unknown = package_of(sp("llvm-20.0.0-rocm-lib"), deriver="unknown-deriver")
    assert (unknown.pname, unknown.version, unknown.output) == ("llvm", "20.0.0-rocm", "lib")


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("7.2.3", "10.1.0", -1),
        ("20.0.0-rocm", "20.0.0", 1),
        ("7.15.0a20260719", "7.15.0", 1),
        ("10.0.0rc1", "10.0.0", 1),
        ("1.0", "1.0.1", -1),
        ("2.0pre1", "2.0", -1),
        ("2.3a", "2.3.1", -1),
        ("1.0", "1.0", 0),
        ("1.0", "1-0", 0),
        ("", "", 0),
        ("1.0a", "1.0b", -1),
        # Digit runs past a C int are strings in names.cc, and strings sort below numbers.
        ("1.99999999999", "1.2", -1),
    ],
)
def test_compare_versions_matches_nix(a: str, b: str, expected: int) -> None:
    assert compare_versions(a, b) == expected
    assert compare_versions(b, a) == -expected


def test_compare_versions_sorts_nightlies_above_release() -> None:
    versions = ["10.1.0", "7.2.3", "7.15.0a20260719", "7.15.0"]
    ordered = sorted(versions, key=functools.cmp_to_key(compare_versions))
    assert ordered == ["7.2.3", "7.15.0", "7.15.0a20260719", "10.1.0"]


def test_pep440_order() -> None:
    assert pep440_order("7.15.0a20260719", "7.15.0") == -1
    assert pep440_order("10.1.0", "7.2.3") == 1
    assert pep440_order("1.0", "1.0.0") == 0
    assert pep440_order("20.0.0-rocm", "20.0.0") is None


def test_diff_flags_pep440_disagreement() -> None:
    left = [pkg("therock-rocm-gfx1151-7.15.0")]
    right = [pkg("therock-rocm-gfx1151-7.15.0a20260719")]
    row = diff_closures(left, right).iloc[0]
    assert row["change"] == "upgraded"
    assert bool(row["pep440_disagrees"]) is True

    agreeing = diff_closures([pkg("rocm-core-7.2.3")], [pkg("rocm-core-10.1.0")]).iloc[0]
    assert bool(agreeing["pep440_disagrees"]) is False


def _example() -> pd.DataFrame:
    shared = pkg("rocm-toolchain", size=5)
    left = [
        pkg("rocm-core-7.2.3", size=100),
        pkg("hipcc-7.2.3", size=30),
        pkg("rocminfo-7.1.1", size=10),
        pkg("rocminfo-7.2.3", size=10),
        pkg("clr-7.2.3", size=200),
        pkg("rocblas-gfx1151-7.1.1", size=None),
        shared,
        shared,  # a duplicate path counts once
    ]
    right = [
        pkg("rocm-core-10.1.0", size=150),
        pkg("rocm-comgr-10.1.0", size=70),
        pkg("rocminfo-7.2.3", size=12, seed="other"),
        pkg("clr-7.2.3", size=210, seed="rebuilt"),
        pkg("rocblas-gfx1151-7.0.0", size=80),
        shared,
    ]
    return diff_closures(left, right)


def test_diff_closures_classifies_every_kind() -> None:
    df = _example()
    assert list(df.columns) == list(COLUMNS)
    changes = dict(zip(df["pname"], df["change"], strict=True))
    assert changes == {
        "rocm-comgr": "added",
        "hipcc": "removed",
        "rocm-core": "upgraded",
        "rocblas-gfx1151": "downgraded",
        "rocminfo": "changed",
        "clr": "rebuilt",
        "rocm-toolchain": "identical",
    }
    # Rows come in CHANGE_ORDER.
    assert list(df["change"]) == list(CHANGE_ORDER)
    rocminfo = df.set_index("pname").loc["rocminfo"]
    assert rocminfo["left_versions"] == "7.1.1, 7.2.3"
    assert rocminfo["right_versions"] == "7.2.3"


def test_diff_closures_versions_sorted_by_nix_order() -> None:
    left = [pkg("rocm-core-10.1.0"), pkg("rocm-core-7.15.0"), pkg("rocm-core-7.2.3")]
    right = [pkg("rocm-core-7.15.0a20260719")]
    row = diff_closures(left, right).iloc[0]
    assert row["left_versions"] == "7.2.3, 7.15.0, 10.1.0"
    assert row["change"] == "changed"


def test_diff_closures_sizes() -> None:
    df = _example().set_index("pname")
    assert df.loc["rocm-core", "left_size"] == 100
    assert df.loc["rocm-core", "right_size"] == 150
    assert df.loc["rocm-core", "size_delta"] == 50
    assert df.loc["rocm-comgr", "left_size"] == 0
    assert df.loc["rocm-comgr", "size_delta"] == 70
    assert df.loc["clr", "size_delta"] == 10
    assert df.loc["rocm-toolchain", "size_delta"] == 0
    # One unknown size makes that side and the delta unknown.
    assert df.loc["rocblas-gfx1151", "left_size"] is pd.NA
    assert df.loc["rocblas-gfx1151", "size_delta"] is pd.NA
    assert df.loc["rocblas-gfx1151", "right_size"] == 80
    assert str(df["size_delta"].dtype) == "Int64"


def test_outputs_are_separate_groups() -> None:
    left = [
        pkg("clr-7.2.3", deriver=sp("clr-7.2.3.drv")),
        pkg("clr-7.2.3-icd", deriver=sp("clr-7.2.3.drv")),
    ]
    right = [
        pkg("clr-10.1.0", deriver=sp("clr-10.1.0.drv")),
        pkg("clr-7.2.3-icd", deriver=sp("clr-7.2.3.drv")),
    ]
    df = diff_closures(left, right)
    got = {(r.pname, r.output): r.change for r in df.itertuples()}
    assert got == {("clr", "out"): "upgraded", ("clr", "icd"): "identical"}


def test_diff_summary_counts_all_kinds() -> None:
    summary = diff_summary(_example())
    assert summary == {
        "added": 1,
        "removed": 1,
        "upgraded": 1,
        "downgraded": 1,
        "changed": 1,
        "rebuilt": 1,
        "identical": 1,
        "left_paths": 7,
        "right_paths": 6,
    }
    empty = diff_summary(diff_closures([], []))
    assert empty == dict.fromkeys(CHANGE_ORDER, 0) | {"left_paths": 0, "right_paths": 0}
