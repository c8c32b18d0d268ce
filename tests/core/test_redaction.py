"""The redaction rules every record shares: what is a secret, and the shape left in its place."""

from __future__ import annotations

import pytest

from qualify.core.redaction import (
    REDACTED,
    holds_redacted,
    is_secret,
    redact_argv,
    redact_env,
    redact_known,
    redact_options,
    redact_text,
    redact_values,
    remember,
)


@pytest.mark.parametrize(
    "name",
    ["hf_token", "HF_TOKEN", "api_key", "API-KEY", "--api-key", "db_password", "client_secret", "db_pass",
     "access-tokens", "extra-access-tokens", "netrc-file", "Authorization", "X-Api-Key", "Private-Token",
     "ssh_private_key", "GITHUB_TOKEN", "aws_credentials"],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret(name)


@pytest.mark.parametrize(
    "name",
    ["max_tokens", "timing_prompt_tokens", "n_tokens", "--tokenizer", "trusted-public-keys", "builders",
     "PATH", "SSH_AUTH_SOCK", "bypass", "passes", "keep", "model"],
)  # fmt: skip
def test_names_that_are_not_secret(name: str) -> None:
    assert not is_secret(name)


def test_argv_keeps_its_shape() -> None:
    argv = [
        "llama-server", "--api-key", "s3cr3t-a", "--hf-token=s3cr3t-b", "--max-tokens", "256",
        "-H", "Authorization: Bearer s3cr3t-c", "https://bob:s3cr3t-d@example.com/m.gguf",
        "--option", "access-tokens", "github.com=s3cr3t-e", "HF_TOKEN=s3cr3t-f",
        "sh -c 'serve --token s3cr3t-g --port 8080'", "https://h/x?access_token=s3cr3t-h&rev=main",
        "--api-key", "--verbose",
    ]  # fmt: skip
    assert redact_argv(argv) == [
        "llama-server", "--api-key", REDACTED, f"--hf-token={REDACTED}", "--max-tokens", "256",
        "-H", f"Authorization: Bearer {REDACTED}", f"https://bob:{REDACTED}@example.com/m.gguf",
        "--option", "access-tokens", REDACTED, f"HF_TOKEN={REDACTED}",
        f"sh -c 'serve --token {REDACTED} --port 8080'", f"https://h/x?access_token={REDACTED}&rev=main",
        "--api-key", "--verbose",
    ]  # fmt: skip


def test_text_forms() -> None:
    assert redact_text("machine h login u password pw-1234") == f"machine h login u password {REDACTED}"
    assert redact_text("curl -H 'X-Api-Key: k-123456' u") == f"curl -H 'X-Api-Key: {REDACTED}' u"
    hf, gh = "hf_" + "a1B2" * 8, "ghp_" + "Z9y8" * 9
    assert redact_text(f"token {hf} and {gh}") == f"token {REDACTED} and {REDACTED}"
    config = "substituters = https://c\naccess-tokens = github.com=ghp_x gitlab.com=glp_y\nmax-jobs = 4"
    assert redact_text(config) == f"substituters = https://c\naccess-tokens = {REDACTED}\nmax-jobs = 4"


def test_env_options_and_values() -> None:
    env = {"HF_TOKEN": "x", "HTTPS_PROXY": "http://u:pp-secret@proxy:3128", "PATH": "/bin"}
    assert redact_env(env) == {
        "HF_TOKEN": REDACTED,
        "HTTPS_PROXY": f"http://u:{REDACTED}@proxy:3128",
        "PATH": "/bin",
    }
    assert redact_options([("access-tokens", "github.com=t"), ("builders", "ssh-ng://u@b x86_64-linux")]) == [
        ["access-tokens", REDACTED],
        ["builders", "ssh-ng://u@b x86_64-linux"],
    ]
    values = {"hf_token": "t", "max_tokens": 64, "api_keys": ["a", "b"], "server": {"password": "p"}}
    assert redact_values(values) == {
        "hf_token": REDACTED,
        "max_tokens": 64,  # a number is never a secret
        "api_keys": [REDACTED, REDACTED],
        "server": {"password": REDACTED},
    }
    assert holds_redacted([["access-tokens", REDACTED]]) and not holds_redacted({"a": 1})


def test_a_file_holding_a_secret_is_named_not_hidden() -> None:
    """netrc-file, an API key file and nix's ssh-key name files: their paths are kept. The same
    names with a value that is no path are secrets."""
    assert redact_options([("netrc-file", "/etc/nix/netrc")]) == [["netrc-file", "/etc/nix/netrc"]]
    uri = "ssh-ng://root@gpu-builder?ssh-key=/root/.ssh/id_builder"
    assert redact_text(uri) == uri
    assert redact_argv(["--api-key-file", "/run/keys/k", "--api-key", "/looks/like/a/path"]) == [
        "--api-key-file", "/run/keys/k", "--api-key", REDACTED,
    ]  # fmt: skip
    assert redact_env({"SSH_KEY": "-----BEGIN OPENSSH PRIVATE KEY-----"}) == {"SSH_KEY": REDACTED}
    assert redact_values({"netrc": "machine h login u password p"}) == {"netrc": REDACTED}


def test_a_remembered_value_is_replaced_wherever_it_appears() -> None:
    remember(["positional-secret-77"])
    assert redact_argv(["tool", "positional-secret-77"]) == ["tool", REDACTED]
    assert redact_known("log: got positional-secret-77.") == f"log: got {REDACTED}."
    # A record compared across runs does not depend on what this process remembered.
    assert redact_values({"note": "positional-secret-77"}) == {"note": "positional-secret-77"}
    remember(["short"])  # too short to replace in ordinary text
    assert redact_known("a short note") == "a short note"
