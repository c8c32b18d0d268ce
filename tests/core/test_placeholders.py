"""Command templates: shlex split first, then placeholders filled token by token."""

from __future__ import annotations

import pytest

from qualify.core.errors import PlaceholderError
from qualify.core.placeholders import expand


def test_list_value_alone_becomes_several_arguments() -> None:
    argv = expand(
        "{bin}/llama-perplexity -m {model} {engine_args} -c 512",
        {"bin": "/nix/store/x/bin", "model": "m.gguf", "engine_args": ("-ctk", "q4_0")},
    )
    assert argv == ["/nix/store/x/bin/llama-perplexity", "-m", "m.gguf", "-ctk", "q4_0", "-c", "512"]


def test_empty_list_disappears() -> None:
    assert expand("run {engine_args} end", {"engine_args": ()}) == ["run", "end"]


def test_string_value_with_spaces_is_never_split() -> None:
    assert expand("cat {file}", {"file": "my model.gguf"}) == ["cat", "my model.gguf"]


def test_quoted_template_token_stays_one_argument() -> None:
    assert expand("sh -c 'echo {x} done'", {"x": "hi"}) == ["sh", "-c", "echo hi done"]


def test_literal_braces() -> None:
    assert expand("printf {{}} {n}", {"n": 3}) == ["printf", "{}", "3"]


def test_unknown_placeholder_suggests() -> None:
    with pytest.raises(PlaceholderError) as err:
        expand("run {modle}", {"model": "m"})
    assert "unknown placeholder {modle}" in err.value.message
    assert 'did you mean "model"' in err.value.message


def test_list_inside_a_token_is_an_error() -> None:
    with pytest.raises(PlaceholderError, match="can only stand alone"):
        expand("--args={engine_args}", {"engine_args": ("a", "b")})


def test_missing_out_path_explains_the_build_stage() -> None:
    with pytest.raises(PlaceholderError) as err:
        expand("{bin}/tool", {"bin": None})
    assert err.value.hint and "build stage" in err.value.hint


def test_unbalanced_brace() -> None:
    with pytest.raises(PlaceholderError, match="unbalanced brace"):
        expand("echo {oops", {})


def test_variables_may_use_builtins_but_not_other_variables(tmp_path) -> None:
    from qualify.core.checkspec import CheckSpec
    from qualify.core.config import ArmSpec, ProjectConfig
    from qualify.core.context import CheckContext, RoleArm

    config = ProjectConfig(
        path=tmp_path / "qualify.toml",
        root=tmp_path,
        flake=".",
        plan_dir=None,
        pinned="pinned",
        reference=None,
        runs_dir=tmp_path / "runs",
        arms={},
        vars={"model": "{project}/data/m.gguf", "args": ("-m", "{project}/x"), "other": "{model}"},
        inherit_env=(),
    )
    arm = RoleArm("pinned", ArmSpec("pinned", ".#default"), out="/nix/store/abc-x")
    ctx = CheckContext(
        spec=CheckSpec("c", "command", {}, {}, ("pinned",)),
        folder=tmp_path / "c",
        run_dir=tmp_path,
        config=config,
        arms={"pinned": arm},
        echo=lambda _: None,
    )
    with pytest.raises(PlaceholderError, match="unknown placeholder {model}"):
        ctx.values("pinned")
    config.vars.pop("other")
    values = ctx.values("pinned")
    assert values["model"] == f"{tmp_path}/data/m.gguf"
    assert values["args"] == ("-m", f"{tmp_path}/x")
    assert ctx.argv("{bin}/tool {args}", "pinned") == ["/nix/store/abc-x/bin/tool", "-m", f"{tmp_path}/x"]
