"""A `kld` role's measurement and a `qualify.logprobs/v1` directory's meta.json as their types:
every recorded run's measurements (written before the type existed, cached references and run
set members among them) read as `KldMeasurement` and write back as they were; one that does not
hold is refused naming the file and the key, and so is a meta.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from evidence_files import field_types, kind_listing
from test_kld_facts import ARCHIVES, numerics_files

from qualify.core.errors import RunStoreError
from qualify.numerics.formats import LogprobDir, TopKFile, topk_rows, write_logprob_dir, write_topk
from qualify.numerics.kind import KIND
from qualify.numerics.stream import LogprobFileError
from qualify.records.numerics import KldMeasurement


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda a: a.name.removesuffix(".tar.xz"))
def test_every_recorded_measurement_reads_whole(archive: Path, tmp_path: Path) -> None:
    for path in numerics_files(archive, tmp_path, "measurement.json"):
        recorded = json.loads(path.read_text())
        recorded.pop("schema_version")
        m = KldMeasurement.read(path)
        assert m.to_json() == {"version": 1, **recorded}, path
        assert m.ok and m.artifact_error is None and m.settings == recorded["settings"]
        assert m.cache_key == recorded.get("cache_key") and m.measured_as == recorded.get("measured_as")


def _measured() -> dict[str, Any]:
    return {
        "role": "candidate",
        "arm": "new",
        "ok": True,
        "outcome": "exit code 0",
        "seconds": 1.5,
        "artifact": "/runs/x/candidate/output",
        "settings": {"n_ctx": 128, "first": 64, "ubatch_size": "512"},
        "format": "llama.cpp _logits_",
        "artifact_bytes": 1000,
    }


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda m: m.update(artifact_bytes="1000"), "artifact_bytes is a string, not a whole number"),
        (lambda m: m.update(settings=[1]), "settings is a list, not an object"),
        (lambda m: m.update(artifact_eror="x"), "artifact_eror: not a field this qualify knows"),
        (lambda m: m.update(error={"hint": "h"}), "error.message is missing"),
        (lambda m: m.update(version=2), "KldMeasurement is version 2"),
    ],
    ids=["wrong-type", "settings", "misspelt", "error", "newer"],
)
def test_a_measurement_that_does_not_hold_names_the_file_and_key(
    tmp_path: Path, change: Any, said: str
) -> None:
    saved = _measured()
    change(saved)
    path = tmp_path / "measurement.json"
    path.write_text(json.dumps({"schema_version": 1, **saved}))
    with pytest.raises(RunStoreError) as refused:
        KldMeasurement.read(path)
    assert refused.value.message.startswith(f"{path}: {said}"), refused.value.message


def test_kinds_json_shows_the_kld_measurement() -> None:
    fields = field_types(kind_listing(KIND.name), "measurement")
    assert fields["artifact_error"] == "str | None" and fields["command.argv"] == "list[str]"
    assert fields["settings"] == "dict[str, JsonValue] | None"


def _tokens() -> np.ndarray[Any, Any]:
    return np.random.default_rng(7).integers(0, 70, (2, 8)).astype(np.int32)


def test_a_logprob_dir_reads_its_meta_through_the_type(tmp_path: Path) -> None:
    logits = np.random.default_rng(7).normal(size=(2, 3, 70))
    folder = write_logprob_dir(tmp_path / "d", _tokens(), list(logits), values="logits", settings={"-c": 8})
    read = LogprobDir(folder)
    assert (read.n_ctx, read.n_vocab, read.n_chunk, read.first, read.values) == (8, 70, 2, 4, "logits")
    assert read.settings == {"-c": 8}
    meta = json.loads((folder / "meta.json").read_text())
    assert "version" not in meta and meta["format"] == "qualify.logprobs/v1"  # the format says it
    del meta["values"], meta["settings"]
    (folder / "meta.json").write_text(json.dumps(meta))
    assert LogprobDir(folder).values == "logprobs"  # absent: log-softmax rows, as before


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda m: m.update(n_ctx="8"), "n_ctx is a string, not a whole number"),
        (lambda m: m.update(values="probs"), "values 'probs' is not one of 'logprobs' or 'logits'"),
        (
            lambda m: m.update(format="qualify.logprobs/v2"),
            "format 'qualify.logprobs/v2' is not one of 'qualify.logprobs/v1'",
        ),
        (lambda m: m.pop("n_vocab"), "n_vocab is missing"),
        (lambda m: m.update(dtype="f4"), "dtype: not a field this qualify knows"),
        (lambda m: m.update(first=7), "first=7 leaves no scored row in n_ctx=8"),
    ],
    ids=["wrong-type", "values", "format", "missing", "unknown", "no-rows"],
)
def test_a_meta_json_that_does_not_hold_names_the_file_and_key(
    tmp_path: Path, change: Any, said: str
) -> None:
    logits = np.random.default_rng(7).normal(size=(2, 3, 70))
    folder = write_logprob_dir(tmp_path / "d", _tokens(), list(logits), values="logits")
    meta = json.loads((folder / "meta.json").read_text())
    change(meta)
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(LogprobFileError) as refused:
        LogprobDir(folder)
    assert refused.value.message.startswith(f"{folder / 'meta.json'}: {said}"), refused.value.message


@pytest.mark.parametrize("with_ref", [True, False])
def test_a_topk_file_gives_each_chunk_with_or_without_the_reference_ids(
    tmp_path: Path, with_ref: bool
) -> None:
    tokens = np.random.default_rng(7).integers(0, 100, (2, 8)).astype(np.int32)
    logits = np.random.default_rng(8).normal(size=(2, 3, 100))
    ref = np.tile(np.arange(64), (3, 1)) if with_ref else None
    rows = [topk_rows(logits[k], tokens[k, 5:8], 64, ref_ids=ref) for k in range(2)]
    chunk = TopKFile(write_topk(tmp_path / "t.npz", tokens, rows, n_vocab=100)).chunk(1)
    np.testing.assert_array_equal(chunk.ids, rows[1].ids)
    assert (chunk.ref_ids is not None) == with_ref and (chunk.logp_at_ref_ids is not None) == with_ref
