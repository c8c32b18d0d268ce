"""run.json's `rejudged` entries as types: each `qualify report --rejudge`, when, with which plan
and which checks it changed (`qualify.pipeline.rejudge` writes them, the report reads them),
checked when the run's record is read (`qualify.pipeline.record`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from qualify.pipeline.recordfields import a_list, is_object, mapping, wrong


@dataclass(frozen=True)
class RejudgedChange:
    """One check whose verdict (or whose limits or judgement parameters) a rejudgement changed."""

    stage: str
    check: str
    before: str
    after: str
    limits_before: Mapping[str, Any]
    limits_after: Mapping[str, Any]
    params_before: Mapping[str, Any] = field(default_factory=dict)
    params_after: Mapping[str, Any] = field(default_factory=dict)
    #: The entry as it was read (saved again as it was); empty for one a rejudgement just made.
    document: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        if self.document:
            return dict(self.document)
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "document"}


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


@dataclass(frozen=True)
class Rejudgement:
    """One `qualify report --rejudge` of the run."""

    at: str
    plan: str
    changed: tuple[RejudgedChange, ...]
    document: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return dict(self.document)


def rejudgements(document: Mapping[str, Any], where: str) -> tuple[Rejudgement, ...]:
    """`document`'s `rejudged` entries, checked: a key of the wrong type (or missing) is refused
    naming `where` and the key."""
    out = []
    for index, entry in enumerate(
        a_list(document.get("rejudged", []), where, "rejudged", is_object, "an object")
    ):
        at = f"rejudged[{index}]"
        for key in ("at", "plan"):
            if not isinstance(entry.get(key), str):
                raise wrong(where, f"{at}.{key}", entry.get(key), "a string")
        changed = a_list(entry.get("changed", []), where, f"{at}.changed", is_object, "an object")
        out.append(
            Rejudgement(
                at=entry["at"],
                plan=entry["plan"],
                changed=tuple(_change(c, where, f"{at}.changed[{i}]") for i, c in enumerate(changed)),
                document=entry,
            )
        )
    return tuple(out)


def _change(entry: Mapping[str, Any], where: str, at: str) -> RejudgedChange:
    for key in ("stage", "check", "before", "after"):
        if not isinstance(entry.get(key), str):
            raise wrong(where, f"{at}.{key}", entry.get(key), "a string")
    tables = {
        key: mapping(entry.get(key, {}), where, f"{at}.{key}")
        for key in ("limits_before", "limits_after", "params_before", "params_after")
    }
    return RejudgedChange(
        stage=entry["stage"],
        check=entry["check"],
        before=entry["before"],
        after=entry["after"],
        limits_before=tables["limits_before"],
        limits_after=tables["limits_after"],
        params_before=tables["params_before"],
        params_after=tables["params_after"],
        document=entry,
    )
