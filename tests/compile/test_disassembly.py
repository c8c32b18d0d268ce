"""The disassembler runner's contract where it touches the host: what the tool sees of the
environment, and what a failure on one code object leaves.

The tool here is a shell script standing in for a disassembler that came with the build under
test and is hostile: it prints its environment instead of a listing. A real llvm-objdump would
not show what it was given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qualify.compile.disassembly import Disassembly, DisassemblyError, probe
from qualify.core.environment import child_env

TOOL = """#!/bin/sh
case "$1" in --version) echo "Hostile LLVM version 99.0"; exit 0 ;; esac
for f in "$@"; do :; done
[ "$f" = 2.o ] && { echo "cannot read $f" >&2; exit 3; }
env
"""


def tool(tmp_path: Path) -> Path:
    path = tmp_path / "objdump"
    path.write_text(TOOL)
    path.chmod(0o755)
    return path


def test_the_tool_never_sees_the_hosts_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secretsecretsecret")
    found = probe([str(tool(tmp_path))], ("-d",), child_env())
    assert found.version == "Hostile LLVM version 99.0"
    seen: dict[str, str] = {}

    def parse(text: str, data: bytes) -> dict[str, dict[str, int]]:
        seen["text"] = text
        return {}

    with Disassembly[str](found, parse, folder=tmp_path) as d:
        d.submit("one", b"\x7fELF", "one.o")
        parsed, failed = d.results()
    assert parsed == {"one": {}} and failed == {}
    assert "ghp_secret" not in seen["text"] and "GITHUB_TOKEN" not in seen["text"]
    assert "TMPDIR=" in seen["text"]  # the folder it may read is given to it
    assert os.environ["GITHUB_TOKEN"] == "ghp_secretsecretsecret"


def test_a_code_object_the_tool_fails_on_leaves_the_others_read(tmp_path: Path) -> None:
    found = probe([str(tool(tmp_path))], ("-d",), child_env())
    with Disassembly[str](found, lambda text, data: {"f": {"instructions": len(text)}}, folder=tmp_path) as d:
        for key in ("a", "b", "c"):
            d.submit(key, b"\x7fELF", f"{key}.o")
        parsed, failed = d.results()
    assert set(parsed) == {"a", "c"} and list(failed) == ["b"]
    assert "b.o" in failed["b"] and "cannot read 2.o" in failed["b"] and "exit code 3" in failed["b"]


def test_a_tool_that_does_not_run_is_named(tmp_path: Path) -> None:
    with pytest.raises(DisassemblyError) as caught:
        probe([str(tmp_path / "no-such-objdump")], ("-d",), child_env())
    assert "no-such-objdump" in caught.value.message and "objdump" in (caught.value.hint or "")
