"""What the evidence-type tests share: a kind's fields as `qualify kinds --json` lists them, the
files of a recorded archive unpacked, and the refusal of a result.json whose facts were edited."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qualify.core.errors import RunStoreError
from qualify.records.result import CheckResult


def kind_listing(kind: str) -> dict[str, Any]:
    """`qualify kinds KIND --json`, run as a user runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "qualify", "kinds", kind, "--json"], capture_output=True, text=True, check=True
    )
    [listed] = json.loads(done.stdout)
    assert isinstance(listed, dict)
    return listed


def field_types(listed: dict[str, Any], part: str = "facts") -> dict[str, str]:
    """Each field of the kind's `part` (facts or measurement) by name: its type as shown."""
    return {f["name"]: f["type"] for f in listed[part]["fields"]}


def refusal(path: Path, document: dict[str, Any]) -> str:
    """The message a result.json holding `document` is refused with when read."""
    path.write_text(json.dumps(document))
    with pytest.raises(RunStoreError) as refused:
        CheckResult.load(path)
    return refused.value.message


def unpacked(archive: Path, where: Path, wanted: Callable[[str], bool]) -> list[Path]:
    """The recorded archive's files whose names `wanted` picks, unpacked under `where`."""
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and wanted(m.name)]
        tar.extractall(where, members=members, filter="data")
    return [where / m.name for m in members]


def document(path: Path) -> dict[str, Any]:
    """A JSON file as it was saved."""
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded
