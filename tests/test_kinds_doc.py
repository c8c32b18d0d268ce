"""docs/check-kinds.md is what `qualify kinds` says: regenerated here and compared."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO, qualify_proc

from qualify.kinddocs import kinds_markdown
from qualify.kinds import KINDS


def test_the_document_is_in_step_with_the_registry() -> None:
    written = (REPO / "docs" / "check-kinds.md").read_text()
    assert written == kinds_markdown(), (
        "regenerate docs/check-kinds.md from qualify.kinddocs.kinds_markdown()"
    )


def test_kinds_json_lists_every_kind_with_its_parameters() -> None:
    done = qualify_proc("kinds", "--json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [k["name"] for k in listed] == [k.name for k in KINDS]
    soak = next(k for k in listed if k["name"] == "soak")
    assert {"name": "duration_s", "type": "number", "default": 28800, "required": False}.items() <= next(
        p for p in soak["params"] if p["name"] == "duration_s"
    ).items()
    one = qualify_proc("kinds", "bench", "--json")
    assert [k["name"] for k in json.loads(one.stdout)] == ["bench"]
    typo = qualify_proc("kinds", "bnech")
    assert typo.returncode == 4 and 'did you mean "bench"' in typo.stdout + typo.stderr


def test_every_kind_declares_the_types_of_its_facts() -> None:
    """`qualify kinds --json` lists the facts and measurement fields of every kind (none is
    left a dict)."""
    done = subprocess.run(
        [sys.executable, "-m", "qualify", "kinds", "--json"], capture_output=True, text=True, check=True
    )
    listed = json.loads(done.stdout)
    assert [k["name"] for k in listed] == [k.name for k in KINDS]
    for kind in listed:
        assert kind["facts"] is not None and kind["facts"]["fields"], kind["name"]
        assert kind["measurement"] is not None and kind["measurement"]["fields"], kind["name"]
