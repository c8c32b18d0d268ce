"""Round-trip tests at the compression level the arm sets in QUICKSTART_LEVEL."""

from __future__ import annotations

import os
import zlib

import pytest

LEVEL = int(os.environ["QUICKSTART_LEVEL"])


@pytest.mark.parametrize("size", [0, 1, 1000, 1 << 20])
def test_roundtrip(size: int) -> None:
    data = bytes((i * 7919) % 251 for i in range(size))
    assert zlib.decompress(zlib.compress(data, LEVEL)) == data


def test_level_is_valid() -> None:
    assert 0 <= LEVEL <= 9


def test_compresses_repetitive_input() -> None:
    data = b"qualify " * 4096
    assert len(zlib.compress(data, LEVEL)) < len(data) // 10
