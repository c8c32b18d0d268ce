"""The redaction rules every record shares: what is a secret, and the shape left in its place."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qualify.core.recordredaction import (
    holds_redacted,
    redact_argv,
    redact_env,
    redact_options,
    redact_values,
)
from qualify.core.redaction import (
    REDACTED,
    Unsplit,
    is_secret,
    redact_known,
    redact_lines,
    redact_text,
    remember,
    remember_urls,
)
from qualify.core.secretsources import remember_ambient, remember_named


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


ENCODED_SECRET = "enc-Secret/Value+42~x"


def _encoded_forms(secret: str) -> list[str]:
    import base64
    from urllib.parse import quote, quote_plus

    raw = secret.encode()
    b64, safe = base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()
    return [
        b64, b64.rstrip("="), safe, safe.rstrip("="), raw.hex(), raw.hex().upper(),
        quote(secret, safe=""), quote(secret), quote_plus(secret), quote(secret, safe="").replace("%2F", "%2f"),
    ]  # fmt: skip


def test_a_known_value_is_hidden_in_every_encoding_a_program_prints_it_in() -> None:
    remember([ENCODED_SECRET])
    for form in _encoded_forms(ENCODED_SECRET):
        assert redact_known(f"got {form} here") == f"got {REDACTED} here", form


@pytest.mark.parametrize("urlsafe", [False, True])
@pytest.mark.parametrize("before", range(6))
def test_a_known_value_inside_a_longer_base64_stream_is_hidden_at_every_alignment(
    before: int, urlsafe: bool
) -> None:
    """Inside a longer stream the value's base64 depends on its byte offset (mod 3) and on its
    neighbours at both ends: every character made of the value's bits alone is hidden, what is
    left shows at most the bits the value shares a character with."""
    import base64

    remember([ENCODED_SECRET])
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    raw = ENCODED_SECRET.encode()
    for after in range(4):
        stream = encode(b"\x7fpre"[:before] + b"pre-"[: max(0, before - 4)] + raw + b"post"[:after]).decode()
        offset = len(b"\x7fpre"[:before] + b"pre-"[: max(0, before - 4)])
        out = redact_known(stream)
        assert REDACTED in out, (before, after, stream)
        head, _, tail = out.partition(REDACTED)
        assert len(head) <= (8 * offset + 5) // 6  # the characters holding the bytes before
        assert len(tail) <= len(stream) - 8 * (offset + len(raw)) // 6  # and those after


def test_a_value_split_over_two_lines_is_hidden_on_both() -> None:
    """A line that ends in the start of a value is held until the next line shows the rest (or
    the output ends); each line keeps its line break, the held line is not lost."""
    remember([ENCODED_SECRET])
    cut = 7
    text = f"first\nsays {ENCODED_SECRET[:cut]}\n{ENCODED_SECRET[cut:]} goes on\nlast"
    assert redact_known(text) == f"first\nsays {REDACTED}\n{REDACTED} goes on\nlast"
    three = f"a {ENCODED_SECRET[:4]}\r\n{ENCODED_SECRET[4:12]}\n{ENCODED_SECRET[12:]} b\n"
    assert redact_known(three) == f"a {REDACTED}\r\n{REDACTED}\n{REDACTED} b\n"
    hexed = ENCODED_SECRET.encode().hex()
    assert redact_known(f"{hexed[:10]}\n{hexed[10:]}") == f"{REDACTED}\n{REDACTED}"
    # The start of a value with something else after it is no value: kept as it is.
    assert (
        redact_known(f"says {ENCODED_SECRET[:cut]}\nnothing more\n")
        == f"says {ENCODED_SECRET[:cut]}\nnothing more\n"
    )
    unsplit = Unsplit()
    assert unsplit.feed(f"x {ENCODED_SECRET[:cut]}\n") == []  # held: the rest may follow
    assert unsplit.close() == [f"x {ENCODED_SECRET[:cut]}\n"]  # the output ended: kept
    assert redact_lines([f"tail {ENCODED_SECRET[:3]}", f"{ENCODED_SECRET[3:]}."]) == [
        f"tail {REDACTED}",
        f"{REDACTED}.",
    ]


def test_a_url_password_printed_in_a_url_is_hidden_when_printed_bare_later() -> None:
    said = "fetching https://deploy:learnt-Pw-8c7b@git.example.com/r.git\nauth failed for learnt-Pw-8c7b"
    assert redact_known(said) == (
        f"fetching https://deploy:{REDACTED}@git.example.com/r.git\nauth failed for {REDACTED}"
    )
    assert redact_known("later: learnt-Pw-8c7b") == f"later: {REDACTED}"


@pytest.mark.parametrize(
    "token",
    ["ghp_" + "x1Y2" * 9, "gho_" + "x1Y2" * 9, "ghs_" + "x1Y2" * 9, "github_pat_" + "11AB_cd" * 6,
     "glpat-" + "aB3dE5gH7jK9mN1pQ3", "xoxb-1234567890-abcdefghij", "xoxp-1234567890-abcdefghij",
     "xoxa-2-1234567890-abcdef", "xoxr-1234567890-abcdefghij", "AKIAIOSFODNN7EXAMPLE"],
)  # fmt: skip
def test_tokens_are_hidden_in_a_childs_output_by_their_form(token: str) -> None:
    assert redact_known(f"using {token} now") == f"using {REDACTED} now"


def test_credentials_in_a_childs_output_by_their_form_but_prose_kept() -> None:
    assert (
        redact_known("> Authorization: Bearer eyJhbGciOi.eyJzdWIi.sig")
        == f"> Authorization: Bearer {REDACTED}"
    )
    assert redact_known("retrying with Bearer a1b2c3d4e5f6") == f"retrying with Bearer {REDACTED}"
    assert redact_known("machine h login u password netrc-form-1") == f"machine h login u password {REDACTED}"
    assert redact_known("  password form-pw-on-its-line") == f"  password {REDACTED}"
    for prose in ("Bearer authentication failed", "the password is wrong", "enter password: "):
        assert redact_known(prose) == prose


def test_a_records_text_that_quotes_output_is_redacted_when_read() -> None:
    """A finding or a reason read back from a run folder (written by an older qualify, or by
    hand) shows no token that its form gives away: every page and JSON is made from it."""
    from qualify.records.result import SavedFinding
    from qualify.records.stage import CheckEntry

    token = "ghp_" + "r3AdB4ck" * 5
    finding = SavedFinding.model_validate({"verdict": "FAIL", "message": f"exit 1\n{token}", "role": None})
    assert finding.message == f"exit 1\n{REDACTED}"
    entry = CheckEntry.model_validate({"name": "c", "kind": "command", "verdict": "FAIL", "reason": token})
    assert entry.reason == REDACTED


FUZZED_SECRET = "Fz9qK2mW7xRt"


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(
        st.builds(
            lambda text, crlf: text + ("\r\n" if crlf else "\n"),
            st.text(alphabet=FUZZED_SECRET + " .", max_size=30),
            st.booleans(),
        ),
        max_size=12,
    ),
    st.lists(st.integers(0, 11), max_size=4),
)
def test_a_value_is_found_however_output_breaks_it_into_lines(pieces: list[str], cuts: list[int]) -> None:
    """Output made of pieces of the value, with the value itself cut into lines at random
    places: every line comes back, in order, with its line break; no line's text, nor any run
    of consecutive lines with their breaks taken out, holds the value."""
    remember([FUZZED_SECRET])
    bounds = sorted({0, *cuts, len(FUZZED_SECRET)})
    lines = list(pieces)
    lines[len(lines) // 2 : len(lines) // 2] = [
        FUZZED_SECRET[a:b] + "\n" for a, b in itertools.pairwise(bounds)
    ]
    unsplit = Unsplit()
    out = [kept for line in lines for kept in unsplit.feed(line)] + unsplit.close()
    assert len(out) == len(lines)
    assert [o[len(o.rstrip("\r\n")) :] for o in out] == [i[len(i.rstrip("\r\n")) :] for i in lines]
    assert FUZZED_SECRET not in "".join(o.rstrip("\r\n") for o in out)
    for before, after in zip(lines, out, strict=True):
        if REDACTED not in after:
            assert before == after
