"""The runs this runs directory made: `runs/.index.json`, each run's folder name and number,
authenticated with qualify's seal key (`qualify.core.sealkey`).

"The latest run" is taken among these only, and a run listed here must carry a seal that
verifies. A folder copied into the runs directory (a run of another host, or one forged with a
higher `sequence` in its run.json) is not listed, so it never becomes the latest, and an index
that does not verify lists nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from qualify.core import jsontext, sealkey

INDEX = ".index.json"


@dataclass(frozen=True)
class Index:
    """The index as read: the runs it lists, or why it lists none."""

    runs: dict[str, int]
    problem: str | None = None


def _payload(key_id: str, runs: dict[str, int]) -> bytes:
    return json.dumps({"key": key_id, "runs": runs}, sort_keys=True, separators=(",", ":")).encode()


def read(runs_dir: Path) -> Index:
    """The runs `runs_dir` made, as its index says, when the index verifies with this host's key."""
    path = runs_dir / INDEX
    try:
        document = jsontext.loads(path.read_bytes())
    except FileNotFoundError:
        return Index({}, f"{path} is missing: no run is known to be made here")
    except (OSError, ValueError) as exc:
        return Index({}, f"{path}: unreadable: {exc}")
    runs = document.get("runs") if isinstance(document, dict) else None
    if not isinstance(runs, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in runs.items()
    ):
        return Index({}, f"{path}: not an index qualify wrote")
    key = sealkey.load(create=False)
    mac, named = document.get("mac"), document.get("key")
    if key is None or named != sealkey.key_id(key):
        return Index({}, f"{path}: made with another key than this host's: not verifiable here")
    if not isinstance(mac, str) or not sealkey.verify(key, _payload(named, runs), mac):
        return Index({}, f"{path}: not authentic (changed since qualify wrote it)")
    return Index(dict(runs))


def add(runs_dir: Path, run_id: str, sequence: int) -> None:
    """List the run `run_id`, number `sequence`, as made here. The caller holds the runs
    directory's counter lock, so two runs made at once are both listed."""
    from qualify.core.runstore import write_json  # the store writes atomically, never through a link

    key = sealkey.load(create=True)
    assert key is not None  # made where missing
    runs = {**read(runs_dir).runs, run_id: sequence}
    named = sealkey.key_id(key)
    write_json(
        runs_dir / INDEX, {"key": named, "runs": runs, "mac": sealkey.sign(key, _payload(named, runs))}
    )
