"""The one process runner, on real child processes (no mocks)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from qualify.core import process
from qualify.core.environment import REDACTED, child_env
from qualify.core.errors import QualifyError, ToolMissing
from qualify.core.groups import group_alive

PY = sys.executable


def test_echo_log_exit_code_and_duration(tmp_path: Path) -> None:
    echoed: list[str] = []
    log = tmp_path / "logs" / "x.log"
    done = process.run(
        [PY, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
        log=log,
        env=child_env(),
        echo=echoed.append,
    )
    assert done.returncode == 3 and not done.ok and not done.timed_out
    assert done.duration_s > 0
    assert echoed[0].startswith("$ ") and "sys.exit(3)" in echoed[0]
    text = log.read_text()
    assert "out\n" in text and "err\n" in text and "# exit code 3" in text
    assert done.output_tail[-2:] == ("out", "err") or set(done.output_tail) >= {"out", "err"}


def test_timeout_kills_the_whole_process_tree(tmp_path: Path) -> None:
    """A shell that starts grandchildren: after the timeout no process of its group is left."""
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! >> {pids}; sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; wait"
    started = time.monotonic()
    done = process.run(["sh", "-c", script], log=tmp_path / "t.log", env=child_env(), timeout_s=1.0)
    assert done.timed_out
    assert time.monotonic() - started < 30
    recorded = [int(p) for p in pids.read_text().split()]
    assert len(recorded) == 3
    shell_pid = recorded[-1]
    # The shell led its own group; nothing alive may remain in it.
    assert not group_alive(shell_pid)
    for pid in recorded:
        state = _state(pid)
        assert state in (None, "Z"), f"pid {pid} still running ({state})"


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_leftover_background_children_are_reaped_after_a_normal_exit(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    done = process.run(
        ["sh", "-c", f"sleep 300 & echo $! > {pids}; exit 0"],
        log=tmp_path / "l.log",
        env=child_env(),
        timeout_s=30,
    )
    assert done.ok
    assert _state(int(pids.read_text())) in (None, "Z")


def test_interrupt_kills_the_group_and_propagates(tmp_path: Path) -> None:
    pids = tmp_path / "pids"

    def interrupt_soon() -> None:
        deadline = time.monotonic() + 20
        while not pids.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_soon, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        process.run(
            ["sh", "-c", f"sleep 300 & echo $! > {pids}; wait"],
            log=tmp_path / "i.log",
            env=child_env(),
            timeout_s=60,
        )
    assert _state(int(pids.read_text())) in (None, "Z")


def test_missing_tool_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ToolMissing, match="cannot run 'no-such-tool-xyz': not found"):
        process.run(["no-such-tool-xyz"], log=tmp_path / "m.log", env=child_env())


def test_environment_allowlist_and_redaction(tmp_path: Path) -> None:
    parent = {
        "PATH": os.environ["PATH"],
        "HOME": "/root",
        "RANDOM_LEAK": "x",
        "HF_TOKEN": "hf_secret_value",
        "KEEP_ME": "1",
    }
    env = child_env(
        {"API_KEY": "sk-abcdef123", "ARM_FLAG": "on"}, inherit=["KEEP_ME", "HF_TOKEN"], parent=parent
    )
    assert "RANDOM_LEAK" not in env
    assert env["KEEP_ME"] == "1" and env["ARM_FLAG"] == "on"
    log = tmp_path / "env.log"
    done = process.run([PY, "-c", "import os; print(sorted(os.environ))", "sk-abcdef123"], log=log, env=env)
    assert done.ok
    text = log.read_text()
    # The child got the secrets; the saved log never shows their values.
    assert "HF_TOKEN" in text and "API_KEY" in text
    assert "hf_secret_value" not in text and "sk-abcdef123" not in text
    assert REDACTED in text


def test_serve_waits_for_readiness_and_always_tears_down(tmp_path: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"

    def ready() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return True
        except OSError:
            return False

    argv = [PY, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)]
    with pytest.raises(RuntimeError, match="suite failed"):
        with process.serve(
            argv, log=tmp_path / "srv.log", env=child_env(), ready=ready, ready_timeout_s=30
        ) as server:
            assert server.alive()
            pid = server.process.pid
            raise RuntimeError("suite failed")
    assert not group_alive(pid)
    assert not ready()


def _serve_one_that_dies(tmp_path: Path, poll_s: float = 0.25) -> QualifyError:
    """What `serve` raises for a server that prints `bad flag` and exits 2 before it is ready."""
    with pytest.raises(QualifyError) as err:
        with process.serve(
            [PY, "-c", "print('bad flag'); raise SystemExit(2)"],
            log=tmp_path / "s.log",
            env=child_env(),
            ready=lambda: False,
            ready_timeout_s=30,
            poll_s=poll_s,
        ):
            pass
    return err.value


def test_serve_reports_a_server_that_dies_before_ready(tmp_path: Path) -> None:
    error = _serve_one_that_dies(tmp_path)
    assert "exited with 2 before it was ready" in error.message
    assert error.hint and "bad flag" in error.hint


def test_a_server_s_last_words_are_quoted_however_late_its_output_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exit is seen before the thread copying the output has read the last line (as on a
    loaded machine, here forced by slowing that thread): the message still quotes it."""
    from qualify.core import outputpump

    keep = outputpump.Pump._keep

    def late(self: outputpump.Pump, line: str) -> None:
        time.sleep(0.5)
        keep(self, line)

    monkeypatch.setattr(outputpump.Pump, "_keep", late)
    assert _serve_one_that_dies(tmp_path, poll_s=0.01).hint == "bad flag"


def _free_port() -> int:
    from qualify.core.loopback import free_port

    return free_port()


def test_capture_reports_missing_tools_as_127() -> None:
    code, text = process.capture(["no-such-tool-xyz", "--version"])
    assert code == 127 and "not found" in text
    code, text = process.capture([PY, "-c", "print('v1.2')"])
    assert (code, text) == (0, "v1.2")


def test_stdin_is_not_inherited(tmp_path: Path) -> None:
    done = process.run(
        [PY, "-c", "import sys; print(repr(sys.stdin.read()))"],
        log=tmp_path / "s.log",
        env=child_env(),
        timeout_s=20,
    )
    assert done.ok and done.output_tail[-1] == "''"
    assert subprocess.DEVNULL  # the runner gives children /dev/null, never the terminal


def test_abba_order_alternates_which_role_goes_first() -> None:
    from qualify.core.context import abba_order

    assert abba_order(("pinned", "candidate"), 4) == [
        ("pinned", "candidate"),
        ("candidate", "pinned"),
        ("pinned", "candidate"),
        ("candidate", "pinned"),
    ]
    with pytest.raises(ValueError):
        abba_order(("a", "b", "c"), 2)


def test_a_log_keeps_at_most_its_cap_whatever_the_lines_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap made small for the test: lines that look like qualify's own notes (`# ...`)
    count against it like any other, and the log says how much it did not keep."""
    from qualify.core import outputpump

    monkeypatch.setattr(outputpump, "MAX_LOG_BYTES", 2000)
    log = tmp_path / "capped.log"
    script = "for i in range(500): print('# not a note of qualify', i)"
    done = process.run([PY, "-c", script], log=log, env=child_env())
    assert done.ok
    text = log.read_text()
    kept = [line for line in text.splitlines() if line.startswith("# not a note")]
    assert 0 < len(kept) < 100
    assert "more bytes of output not kept" in text
    assert done.output_tail[-1] == "# not a note of qualify 499"  # the tail still follows


def test_an_endless_line_is_cut_and_the_child_is_never_blocked(tmp_path: Path) -> None:
    log = tmp_path / "long.log"
    script = "import sys; sys.stdout.write('z' * (8 << 20)); print(); print('after')"
    seen: list[str] = []
    done = process.run([PY, "-c", script], log=log, env=child_env(), on_line=[seen.append])
    assert done.ok
    assert [len(line) < 70_000 for line in seen] == [True, True]
    assert seen[0].endswith(f"[line cut at 65536 bytes: {(8 << 20) - 65536} more bytes dropped]")
    assert seen[1] == "after"
    assert log.stat().st_size < 100_000
