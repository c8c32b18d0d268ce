"""The redaction rules every record shares: what is a secret, and the shape left in its place."""

from __future__ import annotations

from pathlib import Path

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
    remember_ambient,
    remember_named,
    remember_urls,
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


def test_a_url_password_in_a_childs_output_is_hidden_by_its_form() -> None:
    """A child's output gets the rules that are safe on free text: a URL's password is one,
    remembered or not (git, curl and nix quote the URL they fetch)."""
    line = "fatal: unable to access 'https://oauth2:never-remembered-41@example.com/o/r/'\n"
    assert redact_known(line) == f"fatal: unable to access 'https://oauth2:{REDACTED}@example.com/o/r/'\n"
    assert redact_known("a port http://host:8080/path@x stays") == "a port http://host:8080/path@x stays"


def test_url_credentials_are_remembered_by_value() -> None:
    """A flake URL's token reaches nix as written; nix or git may print it bare."""
    remember_urls(
        [
            "git+https://oauth2:glpat-urlValue0123456789a@gitlab.example.com/o/r#pkg",
            "https://u:pct%2Fencoded-77@h/x",
            "https://h/x?rev=main&access_token=query-token-5f6e",
            None,
        ]
    )
    said = "glpat-urlValue0123456789a, pct/encoded-77, pct%2Fencoded-77 and query-token-5f6e"
    assert redact_known(said) == f"{REDACTED}, {REDACTED}, {REDACTED} and {REDACTED}"


def test_nix_config_access_tokens_are_remembered(tmp_path: Path) -> None:
    """An environment holding NIX_CONFIG (a child's) makes its access tokens known: each token,
    the part after GitLab's `PAT:`, and the line's whole value."""
    tokens = "github.com=ghtok-a1b2c3 gitlab.com=PAT:gltok-d4e5f6"
    nix_config = f"experimental-features = nix-command flakes\naccess-tokens = {tokens}\n"
    remember_named({"PATH": "/bin", "NIX_CONFIG": nix_config, "NIX_CONF_DIR": str(tmp_path)})
    assert redact_known(tokens) == REDACTED
    assert redact_known("got ghtok-a1b2c3 and PAT:gltok-d4e5f6") == f"got {REDACTED} and {REDACTED}"
    assert redact_known("experimental-features") == "experimental-features"


def test_the_netrc_passwords_nix_would_use_are_remembered(tmp_path: Path) -> None:
    """Netrc files named by `netrc-file` (NIX_CONFIG, nix.conf, a file nix.conf includes, the
    user's nix.conf), nix's default <NIX_CONF_DIR>/netrc and ~/.netrc: their passwords, and the
    tokens of nix.conf's own secret settings. The files' paths are no secret."""
    conf_dir, home, xdg = tmp_path / "etc-nix", tmp_path / "home", tmp_path / "xdg"
    (xdg / "nix").mkdir(parents=True)
    conf_dir.mkdir()
    home.mkdir()
    (conf_dir / "netrc").write_text("machine a login u password default-netrc-pw-1\n")
    (home / ".netrc").write_text("machine b\n  login u\n  password home-netrc-pw-2\n")
    named = tmp_path / "named-netrc"
    named.write_text("default login x password named-netrc-pw-3")
    (tmp_path / "inc-netrc").write_text("machine c login u password inc-netrc-pw-5")
    (conf_dir / "more.conf").write_text(
        f"netrc-file = {tmp_path / 'inc-netrc'}  # a comment\nextra-access-tokens = example.org=inc-conf-tok-4\n"
    )
    (conf_dir / "nix.conf").write_text("max-jobs = 4\n!include more.conf\n")
    (tmp_path / "user-netrc").write_text("machine d login u password user-conf-netrc-pw-6")
    (xdg / "nix" / "nix.conf").write_text(f"netrc-file = {tmp_path / 'user-netrc'}\n")
    remember_ambient(
        {
            "NIX_CONF_DIR": str(conf_dir),
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(xdg),
            "NIX_CONFIG": f"netrc-file = {named}",
        }
    )
    for secret in (
        "default-netrc-pw-1", "home-netrc-pw-2", "named-netrc-pw-3", "inc-conf-tok-4", "inc-netrc-pw-5",
        "user-conf-netrc-pw-6",
    ):  # fmt: skip
        assert redact_known(f"x {secret} y") == f"x {REDACTED} y", secret
    assert redact_known(str(named)) == str(named)
    # Files that are not there are passed over.
    remember_ambient({"NIX_CONF_DIR": str(tmp_path / "missing"), "HOME": str(tmp_path / "nobody")})


def test_the_secrets_of_a_runs_nix_options_are_remembered(tmp_path: Path) -> None:
    """`--nix-option netrc-file=PATH` points nix at a netrc file: its passwords are known, as
    are an `access-tokens` option's tokens and a substituter URL's password."""
    netrc = tmp_path / "option-netrc"
    netrc.write_text("machine h login u password option-netrc-pw-8a9b\n")
    remember_ambient(
        {"NIX_CONF_DIR": str(tmp_path / "none")},
        settings=[
            ("netrc-file", str(netrc)),
            ("access-tokens", "github.com=option-tok-7c8d"),
            ("extra-substituters", "https://u:cache-pw-6e7f@cache.example.com"),
        ],
    )
    said = "option-netrc-pw-8a9b option-tok-7c8d cache-pw-6e7f"
    assert redact_known(said) == " ".join([REDACTED] * 3)
