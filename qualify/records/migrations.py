"""The run folder's records across their versions, and how an older one is read as the current.

run.json, stage.json and result.json share one version, `schema_version` in each file
(`qualify.core.runstore.RECORD_VERSION`). A record's type (`qualify.records.run`) brings a
document it loads up to the current layout with the steps below, one per older version, before
it checks it; the file itself is never rewritten by a load (a recorded run stays as it was
recorded; only a command that writes the run, such as a rerun or `report --rejudge`, saves it
again, at the current version). A document newer than the current version is refused.

Version 1 (every qualify up to the ones that recorded examples/*/recorded/):
- run.json: a run of one has no "kind" (a set says "set", a fleet "fleet"); "options" holds
  "allow_dirty" and "override_inputs"; each of "invocations" holds "at", "candidate",
  "profile", "only", "from", "force", "no_gate", "allow_dirty" and "override_inputs", and,
  from the qualify that added run sets and nix options on, also what version 2 always holds.
- stage.json: as in version 2.
- result.json: as in version 2, except that one written before a kind said what it judged
  (or drew a chart) has no "judged" (or "charts").

Version 2:
- run.json: "options" also holds "nix_options" (the `--nix-option` pairs, `[name, value]`,
  secrets redacted); each invocation also holds "candidates" (every `--candidate` given),
  "controls" (whether the project's controls were asked for) and "nix_options". A run of one
  still has no "kind": an absent kind is a run of one in every version.
- stage.json: "name", "folder", "status", "verdict" (once complete), "reason", "checks" (each
  "name", "kind", "verdict", "reason") and what the attempt ran with.
- result.json: "verdict", "reason", "judged", "findings", "tables", "facts", "charts" always,
  with what the check ran with.

Version 3 (current):
- run.json: "plan_files", the files the plan was read from when the run was made ("digest",
  and "files": each file's name in the project with its sha256), which a rerun's plan is
  compared with (`qualify.pipeline.planfiles`).
- stage.json: "ran_under" for a stage that ran (or was skipped on its host): the digest of the
  plan it ran under, the source's "revision" and whether it was "dirty", and "plan_changes",
  how that plan differed from the run's "plan_files" (empty: it did not).
- result.json: as in version 2.
- A run narrowed by `--stage` also holds "stages" (those it runs) and "left_out" (the plan's
  others) in "options"; every other run is written as before. A qualify from before `--stage`
  refuses such a run (its "options" hold a key that qualify does not know) rather than reading
  it as a run of every stage.
A version 2 document has neither key, and none is added: its run recorded no plan files, and a
stage of it no plan; a reader takes the key's absence as "not recorded", and a rerun of such a
run records "plan_changes" as null (nothing to compare with). A version 3 record is refused by
a qualify that reads version 2 at most, rather than shown without saying a stage ran under
another plan than the run's.

The steps only add what an older document lacks, with the value it meant then (a version 1 run
without these keys was written before qualify had them: it was given no nix options, it named
its one candidate, it ran no controls), and keep what is there, so a step applied twice
changes nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from qualify.core.errors import RunStoreError
from qualify.core.runstore import RECORD_VERSION

Step = Callable[[dict[str, Any]], dict[str, Any]]


def run_1_to_2(document: dict[str, Any]) -> dict[str, Any]:
    """run.json 1 → 2: the options' and every invocation's nix options (none), and each
    invocation's candidates (the one it named) and controls (none asked for)."""
    options = document.get("options")
    if isinstance(options, dict):
        options.setdefault("nix_options", [])
    for invocation in document.get("invocations") or []:
        if isinstance(invocation, dict):
            named = invocation.get("candidate")
            invocation.setdefault("candidates", [named] if named is not None else [])
            invocation.setdefault("controls", False)
            invocation.setdefault("nix_options", [])
    return document


def stage_1_to_2(document: dict[str, Any]) -> dict[str, Any]:
    """stage.json 1 → 2: the same keys (the version moved with run.json's)."""
    return document


def result_1_to_2(document: dict[str, Any]) -> dict[str, Any]:
    """result.json 1 → 2: what was judged and the charts, empty where the kind said none."""
    for key in ("judged", "findings", "tables", "charts"):
        document.setdefault(key, [])
    document.setdefault("facts", {})
    return document


def unchanged_2_to_3(document: dict[str, Any]) -> dict[str, Any]:
    """run.json, stage.json and result.json 2 → 3: nothing to add. A version 2 run recorded no
    plan files and its stages no plan: the keys stay absent, which reads as "not recorded"."""
    return document


#: For each record, the step that brings a document of version N to N + 1, by N: raising
#: RECORD_VERSION means a step for each record, even one that changes nothing.
RUN_STEPS: dict[int, Step] = {1: run_1_to_2, 2: unchanged_2_to_3}
STAGE_STEPS: dict[int, Step] = {1: stage_1_to_2, 2: unchanged_2_to_3}
RESULT_STEPS: dict[int, Step] = {1: result_1_to_2, 2: unchanged_2_to_3}


def migrate(steps: Mapping[int, Step], document: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`document` (as read from `where`, or built by a writer without a `schema_version`: then
    it is taken as current) in the current layout, without its `schema_version`.

    The document given is left as it is: an older one is copied before a step changes it.
    """
    version = document.get("schema_version", RECORD_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RunStoreError(f"{where}: schema_version {version!r} is not a version of qualify's records")
    if version > RECORD_VERSION:
        raise RunStoreError(
            f"{where}: schema_version {version} is newer than this qualify understands ({RECORD_VERSION})",
            "upgrade qualify to read this run",
        )
    out = dict(document) if version == RECORD_VERSION else copy.deepcopy(dict(document))
    out.pop("schema_version", None)
    while version < RECORD_VERSION:
        out = steps[version](out)
        version += 1
    return out
