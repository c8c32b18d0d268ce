"""What a stage's and a check's records (stage.json, result.json) share as types: the base they
are declared on, the words and names their fields hold, and how a field that does not hold is
refused, naming the file and the key.

A record is a frozen, strict pydantic model (`qualify.checks.evidence` for its habits): every
key qualify writes is a declared field, checked when the document is read; a key no field
covers (a newer qualify's, a hand's) is kept as it was read and saved again. The document is
brought to the current layout first (`qualify.records.migrations`); its file is never
rewritten by a read.


The words a record's fields are checked against: the verdicts a check or a stage may hold,
and what a number is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import NoneType, UnionType
from typing import Annotated, Any, ClassVar, Self, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from qualify.checks.evidence import Part
from qualify.checks.refusals import plain, refusal, refused, type_name
from qualify.core.labels import name_problem
from qualify.core.redaction import redact_known
from qualify.core.runstore import RECORD_VERSION, check_writer, read_json, write_json
from qualify.core.verdicts import StageState, Verdict
from qualify.records import seal
from qualify.records.migrations import Step, migrate

#: A check's verdict; a stage's is one of them or BLOCKED (never measured: its gate failed).
VERDICTS = tuple(v.value for v in Verdict)
STAGE_VERDICTS = (*VERDICTS, StageState.BLOCKED.value)


def number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _one_of(words: tuple[str, ...]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value not in words:
            raise refused(f"{value!r} is not one of {', '.join(words)}")
        return value

    return check


def _plain_name(value: Any) -> Any:
    # A check's or a stage's name is a folder beside its record: it must be a plain name.
    if isinstance(value, str) and (problem := name_problem(value)) is not None:
        raise refused(f"{value!r}: {problem}")
    return value


def seconds(value: Any) -> Any:
    """`value` if it is a finite number of seconds (or None), else refused saying so."""
    if value is None:
        return value
    if not number(value):
        raise refused(f"is {type_name(value)}, not a number of seconds")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an integer of hundreds of digits has no float
        finite = False
    if not finite:
        raise refused(f"is {value!r}, not a finite number of seconds")
    return value


#: A check's verdict word; a stage's is one of them or BLOCKED.
VerdictWord = Annotated[str, BeforeValidator(_one_of(VERDICTS))]
StageVerdictWord = Annotated[str, BeforeValidator(_one_of(STAGE_VERDICTS))]
#: Where a stage's attempt stands: its stage.json is written when it starts, after each check
#: and when it ends.
StageStatus = Annotated[str, BeforeValidator(_one_of(("running", "complete", "interrupted")))]
#: A name that is a folder of the run (a check's, a stage's).
PlainName = Annotated[str, BeforeValidator(_plain_name)]
#: A duration or a time limit, in seconds.
Seconds = Annotated[float, BeforeValidator(seconds)]
#: Text that may quote a command's output (a finding, a reason): its secrets redacted as a
#: child's output is (`redact_known`), when it is written and whenever it is read, so that every
#: page, summary, annotation and JSON made from a record hides them, whoever wrote the file.
OutputText = Annotated[str, AfterValidator(redact_known)]


def _nullable(annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _nullable(get_args(annotation)[0])
    return annotation is None or (origin in (Union, UnionType) and NoneType in get_args(annotation))


class RecordPart(Part):
    """A part of a record (a check as a stage lists it, a finding, the spec): a required field
    left out reads as null, so that its refusal says what the field should hold."""

    @model_validator(mode="before")
    @classmethod
    def _absent_is_null(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        absent = {
            name: None
            for name, f in cls.model_fields.items()
            if f.is_required() and name not in data and not _nullable(f.annotation)
        }
        return {**data, **absent} if absent else data


class Record(RecordPart):
    """A stage's or a check's record: its fields checked, every other key it was read with kept,
    and saved through the type (`save`: checked first, atomic, at the current version)."""

    model_config = ConfigDict(extra="allow")

    #: The steps that bring an older document to the current layout.
    STEPS: ClassVar[Mapping[int, Step]] = {}
    _path: Path = PrivateAttr()

    @property
    def path(self) -> Path:
        """The file the record is of (stage.json, result.json)."""
        return self._path

    @classmethod
    def load(cls, path: Path) -> Self:
        """The record at `path` (RunStoreError naming it when it does not read or hold)."""
        return cls.parse(path, read_json(path, newest=RECORD_VERSION))

    @classmethod
    def parse(cls, path: Path, document: Mapping[str, Any]) -> Self:
        """`document`, the record at `path` (as read, of any version qualify knows, or as a
        writer built it), checked."""
        current = plain(migrate(cls.STEPS, document, str(path)))
        cls._check_shapes(current, path)
        try:
            record = cls.model_validate(current, context={"folder": path.parent.name, "path": path})
        except ValidationError as exc:
            raise refusal(exc, path) from None
        record._path = path
        record._loaded()
        return record

    @classmethod
    def _check_shapes(cls, document: Mapping[str, Any], path: Path) -> None:
        """What a kind checks of the document by hand, before its fields (none here)."""

    def _loaded(self) -> None:
        """What a kind derives once it has read its fields (nothing here)."""

    def to_json(self) -> dict[str, Any]:
        """The document to save (no `schema_version`: `save` stamps it): the keys it was read
        with, each field as the record holds it. The values are the document's own (a record
        holds JSON's types only), so a NaN a judge wrote among its facts stays one."""
        return self.model_dump(exclude_unset=True, by_alias=True)

    def updated(self, *, drop: Sequence[str] = (), **changes: Any) -> Self:
        """This record with `changes` to its document's keys (and the keys `drop` removed),
        checked again."""
        document = {k: v for k, v in self.to_json().items() if k not in drop}
        return self.parse(self.path, {**document, **changes})

    def save(self, path: Path | None = None) -> None:
        """Write the record to `path` (its own file by default) atomically, at the current
        version; it is checked first, so a record no reader would accept is never written (a
        field changed with `model_copy` is checked here). A writer whose lock was removed or
        replaced stops here instead (LockLostError)."""
        document = self.to_json()
        self.parse(self.path, document)
        target = path or self.path
        check_writer(target)
        write_json(target, document, version=RECORD_VERSION)
        seal.note(target)


def _this_folder(value: Any, info: ValidationInfo) -> Any:
    """A record that does not name its stage's folder (or its check) is of the folder it is in."""
    return info.context["folder"] if value is None and info.context is not None else value


#: A name a record may leave out: then its folder's.
FolderName = Annotated[PlainName, BeforeValidator(_this_folder)]
