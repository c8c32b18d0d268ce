"""A stage the plan declares does not apply to the engine: a stage file holding
`not_applicable = "why"` and nothing to run. It shows as NOT APPLICABLE, never runs, and does
not keep a run from qualifying; every verdict line names it with its reason."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qualify.core.plaintext import clean
from qualify.core.tomlfile import Table

#: The stage that builds the arms: every other stage measures what it built, so it applies to
#: every engine, and passing it alone qualifies nothing.
BUILD_STAGE = "build"
#: The stage that makes the candidate durable (its sources mirrored, its closure in a binary
#: cache) and writes the pin's move: it measures nothing of the engine either.
DISTRIBUTION_STAGE = "distribution"
#: The stages that do not measure the engine: a run in which only they decided qualifies nothing.
NOT_MEASURING = (BUILD_STAGE, DISTRIBUTION_STAGE)
#: The most characters a not-applicable reason may have: it is printed in every verdict line.
_REASON_CHARS = 160


@dataclass(frozen=True)
class NotApplicable:
    """A stage the plan declares does not apply to this engine (`not_applicable = "…"` in its
    stage file), with the reason every verdict line repeats."""

    name: str
    file: Path
    reason: str


def not_applicable(top: Table, name: str, file: Path) -> NotApplicable:
    """A stage file that declares its stage does not apply: a reason, and nothing to run."""
    reason = clean(top.string("not_applicable") or "").strip()
    if not reason:
        raise top.error(
            "not_applicable",
            "say why the stage does not apply to this engine",
            'for example not_applicable = "the engine has no server"',
        )
    if len(reason) > _REASON_CHARS or "\n" in reason:
        raise top.error("not_applicable", f"the reason is one line of at most {_REASON_CHARS} characters")
    if name == BUILD_STAGE:
        raise top.error(
            "not_applicable",
            f"the {BUILD_STAGE} stage builds the arms every other stage measures: it applies to every engine",
        )
    for key in ("check", "profiles", "requires", "inconclusive"):
        if key in top.data:
            raise top.error(
                key,
                f"stage {name!r} is declared not applicable, so it runs nothing: {key!r} has no meaning here",
                "remove the not_applicable line to run the stage, or remove the rest",
            )
    return NotApplicable(name, file, reason)
