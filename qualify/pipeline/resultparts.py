"""What a result.json says a reviewer should read, as types: its findings, checked when the
result is read (`qualify.pipeline.checkrecords`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from qualify.core.errors import RunStoreError
from qualify.pipeline.recordfields import HINT, VERDICTS, objects, string, word, wrong


@dataclass(frozen=True)
class SavedFinding:
    """One finding of a check (`qualify.checks.base.Finding` as saved): its verdict word, its
    message and the role it is about (None: the whole check)."""

    verdict: str
    message: str
    role: str | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def saved_findings(document: Any, path: Path) -> tuple[SavedFinding, ...]:
    """Each finding a verdict word, a message and a role (a role's name, or null)."""
    out = []
    for index, finding in enumerate(objects(document, "findings", path)):
        at = f"findings[{index}]"
        verdict = word(finding.get("verdict"), VERDICTS, path, f"{at}.verdict")
        if not isinstance(finding.get("message"), str):
            raise wrong(path, f"{at}.message", finding.get("message"), "a string")
        if "role" not in finding:
            raise RunStoreError(f"{path}: {at} has no role (null for the whole check)", HINT)
        out.append(SavedFinding(verdict, finding["message"], string(finding, "role", path, at=f"{at}.")))
    return tuple(out)
