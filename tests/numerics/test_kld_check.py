"""The `kld` check kind, measured through real commands on artifacts written with the exact
encodings (llama.cpp `_logits_` files and qualify.logprobs/v1 directories), and judged.

Each role's "engine" is `cp`-like: a small script copies the artifact prepared for its arm to
`{out_file}` (pinned.2 gets its own file when one is prepared). Stand-in: the artifacts are
synthetic logits, not an engine's; the files and every step after them are the real ones.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import COMMAND_PY, Project, can_run_as_nobody
from typer.testing import CliRunner

from qualify.checks.base import SavedCheck
from qualify.cli import app
from qualify.core.checkspec import CheckSpec
from qualify.numerics.check import judge
from qualify.numerics.formats import write_logprob_dir
from qualify.numerics.llamalogits import llama_row_width, write_llama_logits
from qualify.numerics.store import load_stats
from qualify.numerics.stream import log_softmax
from qualify.records.numerics import KldFacts

runner = CliRunner()
N_CTX, N_VOCAB, N_CHUNK = 16, 48, 48
N_ROWS = N_CTX - 1 - N_CTX // 2

COPY = """
import shutil, sys
from pathlib import Path
src, folder, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
rerun = src.with_name(src.name + ".2")
if folder.name == "pinned.2" and rerun.exists():
    src = rerun
if src.is_dir():
    shutil.copytree(src, out)
else:
    # Front to back in pieces, as llama-perplexity writes: `out` may be a named pipe.
    with src.open("rb") as source, open(out, "wb") as target:
        while piece := source.read(1 << 16):
            target.write(piece)
"""

ARMS = """
[arms.pinned]
installable = ".#default"
vars = {{ art = "{pinned}" }}
[arms.cand]
installable = ".#cand"
vars = {{ art = "{cand}" }}
[arms.reference]
installable = ".#reference"
vars = {{ art = "{reference}" }}
"""


def _tokens(rng: np.random.Generator, n_chunk: int = N_CHUNK, n_ctx: int = N_CTX) -> np.ndarray:
    return rng.integers(0, N_VOCAB, (n_chunk, n_ctx)).astype(np.int32)


def _logits(seed: int, n_chunk: int = N_CHUNK, n_rows: int = N_ROWS) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 3, (n_chunk, n_rows, N_VOCAB)).astype(np.float32)


def _noise(seed: int, sigma: float, n_chunk: int = N_CHUNK, n_rows: int = N_ROWS) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, sigma, (n_chunk, n_rows, N_VOCAB)).astype(np.float32)


def _kl(base: np.ndarray, other: np.ndarray) -> float:
    """Mean exact KL(base || other) per row, straight from the definition (float64)."""
    b = log_softmax(base.reshape(-1, N_VOCAB))
    q = log_softmax(other.reshape(-1, N_VOCAB))
    return float((np.exp(b) * (b - q)).sum(axis=1).mean())


def _stage(limits: str, **params: object) -> str:
    extra = "\n".join(f"{k} = {json.dumps(v)}" for k, v in params.items())
    return f"""
[[check]]
kind = "kld"
name = "kld"
roles = ["pinned", "candidate", "reference"]
run = "{{py}} {{project}}/copy.py {{art}} {{dir}} {{out_file}}"
resamples = 2000
{extra}
limits = {{ {limits} }}
"""


def _project(make: Callable[..., Project], files: dict[str, Path]) -> Project:
    p = make(ARMS.format(pinned=files["pinned"], cand=files["cand"], reference=files["reference"]))
    (p.root / "copy.py").write_text(COPY)
    return p


def _run(
    make: Callable[..., Project] | Project, files: dict[str, Path], stage: str, runs: Path | None = None
) -> dict:
    p = make if isinstance(make, Project) else _project(make, files)
    p.stage("30-numerics.toml", stage.replace("{py}", sys.executable))
    args = ["run", "--candidate", "cand", "--project", str(p.root)]
    if runs is not None:
        args += ["--runs-dir", str(runs)]
    result = runner.invoke(app, args)
    assert result.exit_code in (1, 3), result.output
    run_dir = sorted(d for d in (runs or p.runs).iterdir() if (d / "run.json").exists())[-1]
    check = run_dir / "30-numerics" / "kld"
    out = json.loads((check / "result.json").read_text())
    out["folder"] = str(check)
    return out


def _llama(path: Path, tokens: np.ndarray, logits: np.ndarray) -> Path:
    return write_llama_logits(path, tokens, list(logits))


@pytest.fixture
def arms(tmp_path: Path) -> dict[str, object]:
    """Reference logits and a pinned build close to them (σ 0.05), as llama.cpp files."""
    rng = np.random.default_rng(7)
    tokens = _tokens(rng)
    ref = _logits(1)
    pinned = ref + _noise(2, 0.05)
    files = {
        "reference": _llama(tmp_path / "ref.kld", tokens, ref),
        "pinned": _llama(tmp_path / "pinned.kld", tokens, pinned),
    }
    return {"tokens": tokens, "ref": ref, "pinned": pinned, "files": files, "dir": tmp_path}


def _limits(kl_p: float) -> str:
    return (
        f"max_mean_kld = {3 * kl_p}, max_p99_kld = {30 * kl_p}, min_top1_agreement = 0.8, "
        "max_abs_dppl_pct = 5.0, max_confident_flips = 20000, noninferiority_margin = 0.5"
    )


def _findings(result: dict, verdict: str) -> list[str]:
    return [f["message"] for f in result["findings"] if f["verdict"] == verdict]


def test_close_candidate_passes_and_a_degraded_one_fails_every_limit(project, arms) -> None:
    kl_p = _kl(arms["ref"], arms["pinned"])
    files = dict(arms["files"])
    files["cand"] = _llama(arms["dir"] / "good.kld", arms["tokens"], arms["ref"] + _noise(3, 0.05))
    good = _run(project, files, _stage(_limits(kl_p)))
    assert good["verdict"] == "PASS", good["findings"]
    # Our mean KL agrees with the definition up to the encoding's noise and the -16 truncation.
    summaries = good["facts"]["summaries"]
    assert summaries["reference|pinned"]["kld_mean"] == pytest.approx(kl_p, rel=0.02, abs=1e-4)
    ni = good["facts"]["noninferiority"]
    assert ni["floor"] == 0.0 and ni["delta"] == pytest.approx(0.5 * ni["mean_kl_pinned"])
    titles = [t["title"] for t in good["tables"]]
    assert any("Non-inferiority" in t for t in titles) and any("Against the reference" in t for t in titles)
    # Non-reference artifacts are reduced to per-token vectors and deleted; the reference is cached.
    folder = Path(good["folder"])
    for role in ("pinned", "pinned.2", "candidate", "reference"):
        assert (folder / role / "pertoken.npz").is_file()
        assert not (folder / role / "output").exists(), role

    files["cand"] = _llama(arms["dir"] / "bad.kld", arms["tokens"], arms["ref"] + _noise(4, 3.0))
    bad = _run(project, files, _stage(_limits(kl_p)))
    assert bad["verdict"] == "FAIL"
    failed = " | ".join(_findings(bad, "FAIL"))
    for label in ("mean KLD", "p99 KLD", "top-1 agreement", "|ΔPPL|", "confident flips", "not non-inferior"):
        assert label in failed, (label, failed)


def test_noninferiority_alone_fails_a_candidate_within_the_model_limits(project, arms) -> None:
    kl_p = _kl(arms["ref"], arms["pinned"])
    files = dict(arms["files"])
    # Twice pinned's distance from the reference: inside loose model limits, not non-inferior.
    worse = arms["ref"] + _noise(5, 0.1)
    files["cand"] = _llama(arms["dir"] / "worse.kld", arms["tokens"], worse)
    loose = "max_mean_kld = 1.0, min_top1_agreement = 0.5, noninferiority_margin = 0.1"
    result = _run(project, files, _stage(loose))
    assert result["verdict"] == "FAIL"
    [message] = _findings(result, "FAIL")
    assert "not non-inferior" in message
    ni = result["facts"]["noninferiority"]
    assert ni["theta"] == pytest.approx(_kl(arms["ref"], worse) - kl_p, rel=0.05)


def test_a_a_passes_and_the_floor_comes_from_a_pinned_rerun(project, arms) -> None:
    files = dict(arms["files"])
    files["cand"] = files["pinned"]
    rerun = arms["pinned"] + _noise(6, 0.01)
    _llama(Path(str(files["pinned"]) + ".2"), arms["tokens"], rerun)
    result = _run(project, files, _stage(_limits(_kl(arms["ref"], arms["pinned"]))))
    assert result["verdict"] == "PASS", result["findings"]
    ni = result["facts"]["noninferiority"]
    assert ni["theta"] == 0.0
    # The rerun differs from pinned, so the floor is a second statement of the margin, each
    # upper bound at 97.5 %; the candidate is pinned itself, so both quantities are ≤ 0.
    tests = {t["name"]: t for t in ni["tests"]}
    assert set(tests) == {"margin", "floor"}
    assert all(t["upper_confidence"] == 0.975 and t["upper"] <= 0 for t in tests.values()), tests
    assert ni["floor"] == pytest.approx(_kl(arms["pinned"], rerun), rel=0.1, abs=2e-5)
    assert ni["delta"] == pytest.approx(max(0.5 * ni["mean_kl_pinned"], 3 * ni["floor"]))


def test_mismatched_tokens_fail_naming_the_first_difference(project, arms) -> None:
    files = dict(arms["files"])
    tokens = arms["tokens"].copy()
    tokens[3, 11] = (tokens[3, 11] + 1) % N_VOCAB
    files["cand"] = _llama(arms["dir"] / "other-text.kld", tokens, arms["ref"])
    result = _run(project, files, _stage("max_mean_kld = 1.0"))
    assert result["verdict"] == "FAIL"
    assert "chunk 3, position 11" in result["reason"], result["reason"]


def test_different_context_settings_are_an_error(project, arms) -> None:
    files = dict(arms["files"])
    rng = np.random.default_rng(7)
    files["cand"] = _llama(
        arms["dir"] / "c32.kld", _tokens(rng, N_CHUNK // 2, 32), _logits(8, N_CHUNK // 2, 15)
    )
    result = _run(project, files, _stage("max_mean_kld = 1.0"))
    assert result["verdict"] == "ERROR"
    assert "settings differ between roles: n_ctx differs: reference 16, candidate 32" in result["reason"]


def test_nan_in_the_candidate_fails_and_exact_kl_for_full_precision_inputs(project, tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    tokens = _tokens(rng)
    ref, pinned = _logits(1), _logits(1) + _noise(2, 0.05)
    files = {
        "reference": write_logprob_dir(tmp_path / "ref", tokens, list(ref), values="logits"),
        "pinned": write_logprob_dir(tmp_path / "pinned", tokens, list(pinned), values="logits"),
    }
    broken = ref + _noise(3, 0.05)
    broken[5, 2, 7] = np.nan
    files["cand"] = write_logprob_dir(tmp_path / "cand", tokens, list(broken), values="logits")
    result = _run(project, files, _stage("max_mean_kld = 1.0"))
    assert result["verdict"] == "FAIL"
    assert any("NaN/Inf" in m for m in _findings(result, "FAIL"))
    assert result["facts"]["kl_floor"] is None  # no llama.cpp input: the exact KL
    assert result["facts"]["summaries"]["reference|pinned"]["kld_mean"] == pytest.approx(_kl(ref, pinned))


def test_too_few_chunks_is_inconclusive_never_pass(project, tmp_path: Path) -> None:
    rng = np.random.default_rng(10)
    tokens = _tokens(rng, 5)
    ref = _logits(1, 5)
    files = {
        "reference": _llama(tmp_path / "r.kld", tokens, ref),
        "pinned": _llama(tmp_path / "p.kld", tokens, ref + _noise(2, 0.05, 5)),
        "cand": _llama(tmp_path / "c.kld", tokens, ref + _noise(3, 0.05, 5)),
    }
    result = _run(project, files, _stage("max_mean_kld = 1.0, noninferiority_margin = 10"))
    assert result["verdict"] == "INCONCLUSIVE"
    assert "5 chunks scored, fewer than min_chunks 48" in result["reason"]


def test_not_enough_disk_is_an_error_with_the_figure_needed(project, arms) -> None:
    files = dict(arms["files"])
    files["cand"] = files["pinned"]
    p = _project(project, files)
    result = _run(p, files, _stage("max_mean_kld = 1.0", artifact_bytes=10**18))
    assert result["verdict"] == "ERROR"
    # At its peak the stage holds the reference, pinned and pinned.2: three artifacts.
    expected = "the numerics stage (reference, pinned, pinned.2) needs 2793967723.85 GiB (3000000000000000000 bytes) free"
    assert expected in result["reason"], result["reason"]
    # Streamed, only the reference is stored: the figure stated before anything runs is one file.
    streamed = _run(p, files, _stage("max_mean_kld = 1.0", artifact_bytes=10**18, stream=True))
    assert (
        "the numerics stage (reference) needs 931322574.62 GiB (1000000000000000000 bytes) free"
        in streamed["reason"]
    )


def test_reference_is_cached_across_runs_and_keep_keeps_artifacts(project, arms, tmp_path: Path) -> None:
    files = dict(arms["files"])
    files["cand"] = files["pinned"]
    runs = tmp_path / "runs"
    p = _project(project, files)
    first = _run(p, files, _stage("max_mean_kld = 1.0"), runs)
    second = _run(p, files, _stage("max_mean_kld = 1.0", keep=True), runs)
    m1 = json.loads((Path(first["folder"]) / "reference" / "measurement.json").read_text())
    m2 = json.loads((Path(second["folder"]) / "reference" / "measurement.json").read_text())
    assert not m1.get("cached") and m2["cached"] and m1["cache_key"] == m2["cache_key"]
    assert Path(m2["artifact"]).is_relative_to(runs / ".cache" / "kld")
    assert (Path(second["folder"]) / "candidate" / "output").is_file()
    assert first["facts"]["summaries"] == second["facts"]["summaries"]


def test_judge_is_pure_and_rejudges_with_new_limits(project, arms) -> None:
    files = dict(arms["files"])
    files["cand"] = _llama(arms["dir"] / "good.kld", arms["tokens"], arms["ref"] + _noise(3, 0.05))
    # 336 tokens in 48 chunks: two equally good builds show non-inferiority within half of
    # pinned's KL, not within the default tenth (the guarded bound is about 4.4 se from θ̂).
    result = _run(project, files, _stage("max_mean_kld = 1.0, noninferiority_margin = 0.5"))
    assert result["verdict"] == "PASS", result["reason"]
    spec = CheckSpec(**{**result["spec"], "roles": tuple(result["spec"]["roles"]), "timeout_s": None})
    tight = CheckSpec(**{**spec.__dict__, "limits": {"max_mean_kld": 1e-9}})
    again = judge(SavedCheck(Path(result["folder"]), tight, spec.roles))
    assert again.verdict.value == "FAIL" and "max_mean_kld" in again.reason


def test_streamed_roles_give_the_same_vectors_and_store_only_the_reference(project, arms) -> None:
    """stream = true: pinned, pinned.2 and the candidate write into named pipes at once."""
    files = dict(arms["files"])
    files["cand"] = _llama(arms["dir"] / "good.kld", arms["tokens"], arms["ref"] + _noise(3, 0.05))
    limits = _limits(_kl(arms["ref"], arms["pinned"]))
    p = _project(project, files)
    on_disk = _run(p, files, _stage(limits), runs=arms["dir"] / "on-disk")
    streamed = _run(p, files, _stage(limits, stream=True), runs=arms["dir"] / "streamed")
    assert streamed["verdict"] == on_disk["verdict"] == "PASS", streamed["findings"]
    for role in ("pinned", "pinned.2", "candidate"):
        folder = Path(streamed["folder"]) / role
        with (
            np.load(folder / "pertoken.npz") as a,
            np.load(Path(on_disk["folder"]) / role / "pertoken.npz") as b,
        ):
            assert a.files == b.files and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a.files)
        m = json.loads((folder / "measurement.json").read_text())
        assert m["streamed"] and m["ok"] and not Path(m["artifact"]).exists()
    record = json.loads((Path(streamed["folder"]) / "numerics.json").read_text())
    [one_pass] = record["passes"]
    assert one_pass["streamed"] and ["pinned", "candidate"] in one_pass["pairs"]
    assert streamed["facts"]["summaries"] == on_disk["facts"]["summaries"]


@pytest.mark.skipif(bool(can_run_as_nobody()), reason=str(can_run_as_nobody()))
def test_streamed_roles_write_their_pipes_as_the_command_user(
    project, arms, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root, qualify runs a check's commands as nobody (`qualify.core.commanduser`), as
    `qualify run` does by default: the named pipes qualify makes for the streamed roles are
    given to that user with their folders, so each role's command opens its pipe for writing.
    The suite's own interpreter and folders are root's alone, so the project, its artifacts and
    its runs sit in a folder nobody can reach and the commands run Debian's python3."""
    reachable = Path(tempfile.mkdtemp(prefix="qualify-stream-", dir="/tmp"))
    try:
        reachable.chmod(0o755)
        files = {name: Path(shutil.copy(path, reachable)) for name, path in arms["files"].items()}
        files["cand"] = _llama(reachable / "good.kld", arms["tokens"], arms["ref"] + _noise(3, 0.05))
        made = _project(project, files)
        p = Project(Path(shutil.copytree(made.root, reachable / "proj")))
        limits = _limits(_kl(arms["ref"], arms["pinned"]))
        monkeypatch.setenv("QUALIFY_COMMAND_USER", "nobody")
        monkeypatch.chdir("/")
        streamed = _run(
            p, files, _stage(limits, stream=True).replace("{py}", COMMAND_PY), runs=reachable / "runs"
        )
        assert streamed["verdict"] == "PASS", streamed["findings"]
        for role in ("pinned", "pinned.2", "candidate"):
            m = json.loads((Path(streamed["folder"]) / role / "measurement.json").read_text())
            assert m["streamed"] and m["ok"], m
    finally:
        shutil.rmtree(reachable, ignore_errors=True)


BROKEN = """
import sys
from pathlib import Path
src, out, stop = Path(sys.argv[1]), Path(sys.argv[3]), int(sys.argv[4])
if stop:
    with open(out, "wb") as target:
        target.write(src.read_bytes()[:stop])
sys.exit(3)
"""


@pytest.mark.parametrize("stop", [0, 20 + 4 * N_CHUNK * N_CTX + 1000])
def test_a_writer_dying_mid_stream_is_an_error_naming_role_and_offset(project, arms, stop: int) -> None:
    """A deliberately broken candidate engine: it writes the first `stop` bytes of a real stream
    into its pipe and exits 3 (with 0 it dies before opening the pipe). Nothing half-written may
    remain, and no writer may outlive the check."""
    files = dict(arms["files"])
    p = project(
        f'[vars]\nstop = "0"\nwriter = "copy.py"\n'
        f'[arms.pinned]\ninstallable = ".#default"\nvars = {{ art = "{files["pinned"]}" }}\n'
        f'[arms.cand]\ninstallable = ".#cand"\nvars = {{ art = "{files["pinned"]}", writer = "broken.py", stop = "{stop}" }}\n'
        f'[arms.reference]\ninstallable = ".#reference"\nvars = {{ art = "{files["reference"]}" }}\n'
    )
    (p.root / "copy.py").write_text(COPY)
    (p.root / "broken.py").write_text(BROKEN)
    stage = _stage(_limits(0.01), stream=True).replace("{project}/copy.py", "{project}/{writer}")
    stage = stage.replace("{out_file}", "{out_file} {stop}")
    result = _run(p, files, stage)
    folder = Path(result["folder"])
    failed = [f for f in result["findings"] if f["verdict"] == "FAIL"]
    messages = " | ".join(f["message"] for f in result["findings"])
    assert result["verdict"] == "FAIL" and any(f["role"] == "candidate" for f in failed), messages
    if stop:
        assert (
            f"candidate: {folder}/candidate/output: the writer stopped at offset {stop}, in chunk 1 of {N_CHUNK}"
            in messages
        )
    else:
        assert "ended before it wrote anything" in messages or "exit code 3" in messages, messages
    assert not (folder / "candidate" / "pertoken.npz").exists()
    assert not (folder / "pinned" / "pertoken.npz").exists()
    assert not [q for q in folder.rglob("output") if q.exists()]  # every pipe removed
    m = json.loads((folder / "pinned" / "measurement.json").read_text())
    assert m["outcome"] != "exit code 0" or m["ok"]  # pinned was ended or had finished


@pytest.mark.parametrize("stream", [False, True])
def test_a_reference_corrupt_mid_stream_is_blamed_on_the_reference(project, arms, stream: bool) -> None:
    """The reference's artifact passes the size check but holds a row no llama-perplexity writes
    (a negative scale in chunk 1), so it fails while the roles are reduced. The role comes from
    the reader that failed, never from the message: a streamed pass once blamed the candidate
    (FAIL) for the reference's file."""
    files = dict(arms["files"])
    corrupt = arms["dir"] / "ref-corrupt.kld"
    corrupt.write_bytes(files["reference"].read_bytes())
    row_bytes = 2 * llama_row_width(N_VOCAB)
    with corrupt.open("r+b") as f:
        f.seek(20 + 4 * N_CHUNK * N_CTX + N_ROWS * row_bytes)  # chunk 1, row 0: its scale
        f.write(np.array([-1.0], "<f4").tobytes())
    files.update(reference=corrupt, cand=files["pinned"])
    result = _run(project, files, _stage(_limits(0.01), stream=stream, cache=""))
    stopped = [f for f in result["findings"] if "scale -1.0" in f["message"]]
    assert [(f["verdict"], f["role"]) for f in stopped] == [("ERROR", "reference")], result["findings"]
    assert stopped[0]["message"].startswith("reference: " if stream else str(Path(result["folder"])))


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
def test_a_run_set_scores_reference_pinned_and_floor_once_for_every_member(
    project, arms, stream: bool
) -> None:
    """Two candidates in one run: the reference, pinned and pinned.2 scored once; each member
    judged on the same vectors a run of its own would have."""
    files = dict(arms["files"])
    close = _llama(arms["dir"] / "close.kld", arms["tokens"], arms["ref"] + _noise(3, 0.05))
    degraded = _llama(arms["dir"] / "degraded.kld", arms["tokens"], arms["ref"] + _noise(4, 3.0))
    files["cand"] = close
    p = _project(project, files)
    config = (p.root / "qualify.toml").read_text()
    (p.root / "qualify.toml").write_text(
        config + f'[arms.cand2]\ninstallable = ".#cand2"\nvars = {{ art = "{degraded}" }}\n'
    )
    stage = _stage(_limits(_kl(arms["ref"], arms["pinned"])), stream=stream)
    alone = _run(p, files, stage, runs=arms["dir"] / "alone")  # cand in a run of its own
    p.stage("30-numerics.toml", stage.replace("{py}", sys.executable))
    result = runner.invoke(
        app, ["run", "--candidate", "cand", "--candidate", "cand2", "--project", str(p.root)]
    )
    assert result.exit_code == 1, result.output
    [run] = [d for d in p.runs.iterdir() if (d / "run.json").is_file()]
    joint = run / "30-numerics" / "kld"
    assert sorted(d.name for d in joint.iterdir() if (d / "measurement.json").is_file()) == [
        "cand", "cand2", "pinned", "pinned.2", "reference",
    ]  # fmt: skip
    logs = sorted(q.name for q in (joint / "logs").iterdir())
    assert logs.count("pinned-run.log") == 1 and "pinned-run-2.log" in logs
    verdicts = {
        m: json.loads((run / m / "30-numerics" / "kld" / "result.json").read_text())
        for m in ("cand", "cand2")
    }
    assert verdicts["cand"]["verdict"] == alone["verdict"] == "PASS", verdicts["cand"]["findings"]
    assert verdicts["cand2"]["verdict"] == "FAIL"
    view = run / "cand" / "30-numerics" / "kld"
    for role in ("pinned", "pinned.2", "candidate"):
        with (
            np.load(view / role / "pertoken.npz") as a,
            np.load(Path(alone["folder"]) / role / "pertoken.npz") as b,
        ):
            assert sorted(a.files) == sorted(b.files), role
            assert all(np.array_equal(a[k], b[k], equal_nan=True) for k in a.files), role
        m = json.loads((view / role / "measurement.json").read_text())
        assert m["measured_as"] == ("cand" if role == "candidate" else role)
    assert verdicts["cand"]["facts"]["noninferiority"] == alone["facts"]["noninferiority"]


def test_a_reference_identical_to_pinned_is_named_as_the_reason_delta_is_zero(project, arms) -> None:
    """The reference is pinned's own file: δ has nothing to scale, so a candidate a little off
    pinned fails non-inferiority, and the result says why rather than only "θ > δ 0"."""
    files = dict(arms["files"])
    files["reference"] = files["pinned"]
    files["cand"] = _llama(arms["dir"] / "near.kld", arms["tokens"], arms["pinned"] + _noise(8, 0.01))
    loose = "max_mean_kld = 1.0, min_top1_agreement = 0.5, noninferiority_margin = 100.0"
    result = _run(project, files, _stage(loose))
    ni = result["facts"]["noninferiority"]
    assert ni["mean_kl_pinned"] == 0.0 and ni["delta"] == 0.0
    assert result["verdict"] == "FAIL" and any("not non-inferior" in m for m in _findings(result, "FAIL"))
    [warned] = [f for f in result["findings"] if f["verdict"] == "WARN"]
    assert warned["role"] == "reference" and "exactly as pinned" in warned["message"]


def _corpus(tmp_path: Path, chunks: int, candidate_sigma: float) -> dict[str, Path]:
    """A longer text than the fixture's: reference, pinned (σ 0.05 from it), its rerun and a
    candidate `candidate_sigma` from the reference, as llama.cpp files."""
    rng = np.random.default_rng(11)
    tokens = _tokens(rng, chunks)
    ref = _logits(1, chunks)
    pinned = ref + _noise(2, 0.05, chunks)
    files = {
        "reference": _llama(tmp_path / "ref.kld", tokens, ref),
        "pinned": _llama(tmp_path / "pinned.kld", tokens, pinned),
        "cand": _llama(tmp_path / "cand.kld", tokens, ref + _noise(3, candidate_sigma, chunks)),
    }
    # A rerun a hundredth of pinned's KL away: 3 × that floor stays inside the margin of 0.5.
    _llama(tmp_path / "pinned.kld.2", tokens, pinned + _noise(4, 0.005, chunks))
    return files


LOOSE = (
    "max_mean_kld = 1.0, max_p99_kld = 10.0, min_top1_agreement = 0.5, max_abs_dppl_pct = 50.0, "
    "max_confident_flips = 100000, noninferiority_margin = 0.5"
)


def test_a_look_that_decides_ends_the_scoring_and_a_rejudge_finds_it_again(project, tmp_path: Path) -> None:
    """200 chunks, looks planned at 48, 96, 192 and 200. A candidate as close to the reference
    as pinned is decided before the corpus ends: streamed, the writers are ended at that look
    and the saved vectors stop there; scored to files, every chunk is scored and the judge
    stops at the same look. A rejudge of either walks to the same look."""
    files = _corpus(tmp_path, 200, 0.05)
    p = _project(project, files)
    streamed = _run(p, files, _stage(LOOSE, stream=True), runs=tmp_path / "streamed")
    on_disk = _run(p, files, _stage(LOOSE), runs=tmp_path / "on-disk")
    assert streamed["verdict"] == on_disk["verdict"] == "PASS", streamed["findings"]
    looks = streamed["facts"]["looks"]
    assert looks == on_disk["facts"]["looks"] and looks["planned"] == [48, 96, 192, 200]
    assert looks["chunks"] < 200 and looks["confidence"] == pytest.approx(1 - 0.05 / 4)
    assert f"{looks['chunks']} chunks (look {looks['look']} of 4" in streamed["reason"]
    [scored] = json.loads((Path(streamed["folder"]) / "numerics.json").read_text())["passes"]
    assert scored["chunks"] == looks["chunks"] and scored["stopped_at_look"]
    on_disk_passes = json.loads((Path(on_disk["folder"]) / "numerics.json").read_text())["passes"]
    assert {p["tokens"] for p in on_disk_passes} == {200 * N_ROWS}
    for role in ("pinned", "pinned.2", "candidate"):
        m = json.loads((Path(streamed["folder"]) / role / "measurement.json").read_text())
        assert m["ok"] and m.get("stopped_after_chunks") in (None, looks["chunks"]), m
    saved = load_stats(Path(streamed["folder"]))
    assert saved is not None and saved.n_chunks == looks["chunks"]
    for result in (streamed, on_disk):
        spec = CheckSpec(**{**result["spec"], "roles": tuple(result["spec"]["roles"]), "timeout_s": None})
        again = judge(SavedCheck(Path(result["folder"]), spec, spec.roles))
        assert isinstance(again.facts, KldFacts) and again.facts.looks is not None
        assert again.verdict.value == "PASS" and again.facts.looks.model_dump() == looks


def test_a_candidate_on_the_margin_is_scored_to_the_end_and_judged_at_the_last_look(
    project, tmp_path: Path
) -> None:
    """KL scales with the noise's square: a candidate at σ 0.05·√1.5 sits on the margin of 0.5,
    so no look decides and the whole corpus is scored."""
    files = _corpus(tmp_path, 200, 0.05 * 1.5**0.5)
    p = _project(project, files)
    streamed = _run(p, files, _stage(LOOSE, stream=True), runs=tmp_path / "streamed")
    assert streamed["verdict"] == "INCONCLUSIVE", streamed["findings"]
    looks = streamed["facts"]["looks"]
    assert looks["look"] == 4 and looks["chunks"] == 200 and streamed["facts"]["n_chunks"] == 200
    [scored] = json.loads((Path(streamed["folder"]) / "numerics.json").read_text())["passes"]
    assert scored["chunks"] == 200 and not scored["stopped_at_look"]
    m = json.loads((Path(streamed["folder"]) / "candidate" / "measurement.json").read_text())
    assert m["ok"] and "stopped_after_chunks" not in m
