"""Every parser of outside input, fuzzed: only qualify's own error types may escape, no hang.

Each test has a fixed example budget so the suite stays within seconds; set
QUALIFY_FUZZ_EXAMPLES (e.g. 5000) for a longer run. Inputs are random bytes and text, and
valid inputs with random damage (truncated, bytes flipped), which reach deeper than noise.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qualify import kinds
from qualify.bench.data import UnitOutputInvalid, read_llama_bench, read_metrics_unit
from qualify.build.internaljson import BuildLog, parse_dry_run
from qualify.build.nix import first_result, parse_flake_metadata
from qualify.checks.junit import JUnitInvalid, read_junit, read_junit_cases
from qualify.checks.metrics import MetricsInvalid, read_metrics
from qualify.compile.ptxaslog import PtxasLogError, read_ptxas_log
from qualify.compile.scan import scan
from qualify.core.config import load_config
from qualify.core.errors import QualifyError
from qualify.numerics.formats import open_stream
from qualify.numerics.llamalogits import write_llama_logits
from qualify.pipeline.plan import load_plan
from qualify.serving.client import Client, event_content
from qualify.soak.telemetry import compaction_counters, fdinfo_memory, memory_psi

kinds.install()
FUZZ = settings(
    max_examples=int(os.environ.get("QUALIFY_FUZZ_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    derandomize=os.environ.get("QUALIFY_FUZZ_EXAMPLES") is None,  # CI: the same inputs every run
)


@contextmanager
def one_file(name: str, data: bytes) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        yield path


def damaged(valid: bytes) -> st.SearchStrategy[bytes]:
    """`valid`, cut short or with a few bytes changed."""

    def damage(draw: Callable[..., object]) -> bytes:
        data = bytearray(valid)
        if draw(st.booleans()):
            data = data[: draw(st.integers(0, max(len(data) - 1, 0)))]  # type: ignore[misc]
        for _ in range(draw(st.integers(0, 8))):  # type: ignore[call-overload]
            if data:
                at = draw(st.integers(0, len(data) - 1))
                data[at] = draw(st.integers(0, 255))  # type: ignore[call-overload]
        return bytes(data)

    return st.composite(damage)()


TOML_TEXT = st.one_of(
    st.text(max_size=400),
    st.builds(
        lambda k, v: f"{k} = {v}\n",
        st.sampled_from(["flake", "plan", "pinned", "reference", "[arms.a]", "arms", "vars"]),
        st.sampled_from(['"x"', "1", "[1, 2]", "{ a = 1 }", "true", '"."', "[[x]]"]),
    ),
    st.just('[arms.pinned]\ninstallable = ".#a"\n[arms.c]\ninstallable = 3\n'),
)


@FUZZ
@given(TOML_TEXT)
def test_qualify_toml(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "qualify.toml").write_text(text)
        try:
            load_config(Path(tmp))
        except QualifyError as exc:
            assert "qualify.toml" in exc.message


PLAN_TEXT = st.one_of(
    st.text(max_size=400),
    st.builds(
        lambda kind, key, value: f'[[check]]\nkind = "{kind}"\n{key} = {value}\n',
        st.sampled_from([k.name for k in kinds.KINDS] + ["nope"]),
        st.sampled_from(["run", "roles", "limits", "timeout", "name", "vars", "server", "profiles"]),
        st.sampled_from(['"x"', "1", '["candidate"]', "{ max_x = 1 }", "-1", '"{modle}"', "[]"]),
    ),
)


@FUZZ
@given(PLAN_TEXT)
def test_plan_files(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "20-compile.toml").write_text(text)
        try:
            load_plan(Path(tmp))
        except QualifyError as exc:
            assert "20-compile.toml" in exc.message


JUNIT = b"<testsuites><testsuite name='s'><testcase classname='a' name='b' time='0.5'><failure/></testcase></testsuite></testsuites>"


@FUZZ
@given(st.one_of(st.binary(max_size=300), damaged(JUNIT)))
def test_junit(data: bytes) -> None:
    with one_file("junit.xml", data) as path:
        for reader in (read_junit, read_junit_cases):
            try:
                reader(path)
            except JUnitInvalid as exc:
                assert str(path) in str(exc)


LLAMA_BENCH = json.dumps(
    {
        "n_prompt": 16,
        "n_gen": 0,
        "n_depth": 0,
        "samples_ns": [1000, 1100],
        "samples_ts": [1.0, 1.0],
        "n_threads": 2,
        "build_commit": "x",
        "backends": "CPU",
    }
).encode()


@FUZZ
@given(st.one_of(st.text(max_size=300), damaged(LLAMA_BENCH).map(lambda b: b.decode("utf-8", "replace"))))
def test_llama_bench_jsonl(text: str) -> None:
    try:
        read_llama_bench(text, "unit 3 output")
    except UnitOutputInvalid as exc:
        assert "unit 3 output" in str(exc)


METRICS = json.dumps(
    {"schema_version": 1, "metrics": [{"name": "t", "unit": "u", "higher_is_better": True, "samples": [1.0]}]}
).encode()


@FUZZ
@given(st.one_of(st.binary(max_size=300), damaged(METRICS)))
def test_metrics_json(data: bytes) -> None:
    with one_file("output", data) as path:
        for reader, error in ((read_metrics, MetricsInvalid), (read_metrics_unit, UnitOutputInvalid)):
            try:
                reader(path)
            except error as exc:  # type: ignore[misc]
                assert str(path) in str(exc)


def _llama_file() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_llama_logits(
            Path(tmp) / "base.kld",
            (np.arange(8) % 5).reshape(1, 8),
            [np.random.default_rng(0).normal(size=(3, 5))],
        )
        return path.read_bytes()


LLAMA_LOGITS = _llama_file()


@FUZZ
@given(st.one_of(st.binary(max_size=400), damaged(LLAMA_LOGITS)))
def test_llama_logits_file(data: bytes) -> None:
    with one_file("base.kld", data) as path:
        try:
            stream = open_stream(path)
            for chunk in stream.chunks():
                chunk.logprobs()
        except QualifyError as exc:
            assert str(path) in exc.message


ELF_HEADER = bytes.fromhex("7f454c46020101400000000000000000") + bytes(48)


@FUZZ
@given(st.one_of(st.binary(max_size=600), damaged(ELF_HEADER + bytes(200)), damaged(b"__CLANG_OFFLOAD_BUNDLE__" + bytes(80)),
                 damaged(b"CCOB" + bytes(60)), damaged(bytes.fromhex("50ed55ba01001000") + bytes(80)), damaged(b"!<arch>\n" + bytes(80))))  # fmt: skip
def test_code_objects_bundles_cubins_and_fatbins(data: bytes) -> None:
    """Whatever the bytes, scanning them reports the file unreadable or reads it; it never raises."""
    with one_file("kernels.bin", data) as path:
        found = scan(path, host_patterns=())
        for item in getattr(found, "unreadable", []):
            assert "kernels.bin" in json.dumps(item)


@FUZZ
@given(st.text(max_size=500))
def test_ptxas_logs(text: str) -> None:
    try:
        read_ptxas_log(text, "ptxas.log")
    except PtxasLogError as exc:
        assert "ptxas.log" in str(exc)


@FUZZ
@given(st.text(max_size=300), st.text(max_size=300), st.text(max_size=300))
def test_proc_and_fdinfo_text(fdinfo: str, psi: str, vmstat: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc = Path(tmp)
        (proc / "42" / "fdinfo").mkdir(parents=True)
        (proc / "42" / "fdinfo" / "3").write_text(fdinfo)
        (proc / "psi").write_text(psi)
        (proc / "vmstat").write_text(vmstat)
        assert all(isinstance(v, int) for v in fdinfo_memory([42], proc=proc).values())
        memory_psi(proc / "psi")
        compaction_counters(proc / "vmstat")


INTERNAL_JSON = [
    '@nix {"action":"start","id":7,"level":3,"text":"building","type":105,"fields":["/nix/store/a-x.drv","",1,1]}',
    '@nix {"action":"result","id":7,"type":101,"fields":["a log line"]}',
    '@nix {"action":"stop","id":7}',
    '@nix {"action":"msg","level":0,"msg":"error: builder for \'/nix/store/a-x.drv\' failed with exit code 1"}',
]


@FUZZ
@given(st.lists(st.one_of(st.text(max_size=200), st.sampled_from(INTERNAL_JSON),
                          damaged(INTERNAL_JSON[0].encode()).map(lambda b: b.decode("utf-8", "replace"))),
                max_size=20))  # fmt: skip
def test_nix_internal_json_and_outputs(lines: list[str]) -> None:
    log = BuildLog()
    for at, line in enumerate(lines):
        log.feed(float(at), line)
    log.built()
    log.error_paths()
    parse_dry_run(lines)
    for text in lines:
        with suppress(QualifyError):
            first_result(text)
        try:
            data = json.loads(text)
        except ValueError:
            continue
        if isinstance(data, dict):
            with suppress(QualifyError):
                parse_flake_metadata(".", data)


class _Reply:
    """What the fuzzed server answers next: status, content type and body."""

    status = 200
    content_type = "text/event-stream"
    body = b""


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(_Reply.status)
        self.send_header("content-type", _Reply.content_type)
        self.send_header("content-length", str(len(_Reply.body)))
        self.end_headers()
        self.wfile.write(_Reply.body)

    def log_message(self, *_args: object) -> None:
        pass


@contextmanager
def fuzz_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


SSE = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'


def test_openai_responses_and_streams() -> None:
    with fuzz_server() as url:
        client = Client(url, 5.0, lambda: True)

        @FUZZ
        @given(
            st.sampled_from([200, 400, 500]),
            st.sampled_from(["text/event-stream", "application/json", "text/plain"]),
            st.one_of(st.binary(max_size=300), damaged(SSE)),
        )
        def one(status: int, content_type: str, body: bytes) -> None:
            _Reply.status, _Reply.content_type, _Reply.body = status, content_type, body
            streamed = client.stream("/v1/chat/completions", {"messages": []})
            for event in streamed.events:
                event_content(event)
            reply = client.post("/v1/chat/completions", {"messages": []})
            assert reply.status in (status, 0)

        try:
            one()
        finally:
            client.close()
