"""Every config and plan error names the file, the key (with its line) and what was expected."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qualify.core.config import load_config
from qualify.core.errors import ConfigError, ExitCode, UsageError
from qualify.kinds import KINDS
from qualify.pipeline.plan import DEFAULT_ORDER, load_plan


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_bad_toml_names_file_and_line(tmp_path: Path) -> None:
    write(tmp_path / "qualify.toml", '[arms.pinned]\ninstallable = ".#default"\nbroken = \n')
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert str(tmp_path / "qualify.toml") in err.value.message
    assert "line 3" in err.value.message
    assert err.value.exit_code == ExitCode.USAGE_ERROR


def test_unknown_key_suggests_close_name_with_line(tmp_path: Path) -> None:
    write(
        tmp_path / "qualify.toml",
        '[arms.pinned]\ninstallable = ".#default"\n\n[arms.rocm10]\ninstalable = ".#rocm10"\n',
    )
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    message = err.value.message
    assert f"{tmp_path / 'qualify.toml'}:5" in message
    assert "arms.rocm10.instalable" in message
    assert 'did you mean "installable"' in message


def test_unknown_top_level_key(tmp_path: Path) -> None:
    write(tmp_path / "qualify.toml", 'flak = "."\n[arms.pinned]\ninstallable = "x"\n')
    with pytest.raises(ConfigError, match=r'qualify.toml:1: flak: unknown key .*did you mean "flake"'):
        load_config(tmp_path)


def test_wrong_type_names_key_and_expectation(tmp_path: Path) -> None:
    write(tmp_path / "qualify.toml", "[arms.pinned]\ninstallable = 7\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert re.search(
        r"qualify.toml:2: arms.pinned.installable: expected a string, got an integer", err.value.message
    )


def test_missing_required_key(tmp_path: Path) -> None:
    write(tmp_path / "qualify.toml", '[arms.pinned]\ndevshell = ".#x"\n')
    with pytest.raises(ConfigError, match="missing required key 'installable'"):
        load_config(tmp_path)


def test_missing_arm_for_candidate(tmp_path: Path) -> None:
    write(tmp_path / "qualify.toml", '[arms.pinned]\ninstallable = "x"\n[arms.rocm10]\ninstallable = "y"\n')
    config = load_config(tmp_path)
    with pytest.raises(UsageError) as err:
        config.arm("rocm1O", role="candidate")
    assert "no arm named 'rocm1O' for the candidate role" in err.value.message
    assert 'did you mean "rocm10"' in err.value.message
    assert err.value.hint == "arms defined: pinned, rocm10"


def test_pinned_arm_must_exist(tmp_path: Path) -> None:
    write(tmp_path / "qualify.toml", 'pinned = "main"\n[arms.mian]\ninstallable = "x"\n')
    with pytest.raises(ConfigError, match=r'qualify.toml:1: pinned: names no arm .main.*did you mean "mian"'):
        load_config(tmp_path)


def test_var_may_not_shadow_a_placeholder(tmp_path: Path) -> None:
    write(tmp_path / "qualify.toml", '[arms.pinned]\ninstallable = "x"\n[vars]\nout = "y"\n')
    with pytest.raises(ConfigError, match="vars.out: 'out' is a placeholder qualify fills itself"):
        load_config(tmp_path)


def test_missing_config_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert "no qualify.toml" in err.value.message
    assert err.value.hint and "qualify init" in err.value.hint


def test_unknown_check_kind_lists_known_kinds(tmp_path: Path) -> None:
    write(tmp_path / "stages" / "20-compile.toml", '[[check]]\nkind = "test"\nrun = "true"\n')
    with pytest.raises(ConfigError) as err:
        load_plan(tmp_path / "stages")
    assert "20-compile.toml:2: check[0].kind: unknown check kind 'test'" in err.value.message
    assert 'did you mean "tests"' in err.value.message
    assert err.value.hint == "known kinds: " + ", ".join(kind.name for kind in KINDS)
    assert err.value.hint.startswith("known kinds: nix-build, command, tests, kernel-resources")


def test_unknown_check_parameter_in_second_check(tmp_path: Path) -> None:
    write(
        tmp_path / "stages" / "20-compile.toml",
        '[[check]]\nkind = "command"\nname = "a"\nrun = "true"\n\n'
        '[[check]]\nkind = "command"\nname = "b"\nrun = "true"\nmetric = true\n',
    )
    with pytest.raises(ConfigError) as err:
        load_plan(tmp_path / "stages")
    assert "20-compile.toml:10: check[1].metric" in err.value.message
    assert 'did you mean "metrics"' in err.value.message


def test_limit_names_are_checked(tmp_path: Path) -> None:
    write(
        tmp_path / "stages" / "30-numerics.toml",
        '[[check]]\nkind = "command"\nrun = "true"\nlimits = { kld = 0.1 }\n',
    )
    with pytest.raises(ConfigError, match=r"limit 'kld' must be named max_\*, min_\* or \*_margin"):
        load_plan(tmp_path / "stages")


def test_profile_overrides_and_unknown_profile(tmp_path: Path) -> None:
    write(
        tmp_path / "stages" / "30-numerics.toml",
        'inconclusive = "fail"\n[[check]]\nkind = "command"\nname = "size"\nrun = "true"\n'
        "limits = { ratio_margin = 0.02, min_ratio = 2.0 }\nvars = { reps = 5 }\n"
        '[profiles.quick]\ninconclusive = "warn"\n'
        "[profiles.quick.check.size]\nlimits = { ratio_margin = 0.05 }\nvars = { reps = 2 }\n",
    )
    base = load_plan(tmp_path / "stages")
    quick = load_plan(tmp_path / "stages", "quick")
    assert base.stages[0].checks[0].limits == {"ratio_margin": 0.02, "min_ratio": 2.0}
    assert quick.stages[0].checks[0].limits == {"ratio_margin": 0.05, "min_ratio": 2.0}
    assert quick.stages[0].checks[0].vars == {"reps": 2}
    assert quick.stages[0].inconclusive_as_warn and not base.stages[0].inconclusive_as_warn
    assert quick.profile == "quick"
    with pytest.raises(UsageError, match=r"defines no profile 'quik'.*did you mean \"quick\""):
        load_plan(tmp_path / "stages", "quik")


def test_profile_naming_an_unknown_check(tmp_path: Path) -> None:
    write(
        tmp_path / "stages" / "30-numerics.toml",
        '[[check]]\nkind = "command"\nname = "size"\nrun = "true"\n'
        "[profiles.quick.check.sise]\nvars = { reps = 2 }\n",
    )
    with pytest.raises(ConfigError, match=r"has no check 'sise'.*did you mean \"size\""):
        load_plan(tmp_path / "stages")


def test_stage_order_is_file_order_and_missing_defaults_are_listed(tmp_path: Path) -> None:
    for name in ("60-bench", "20-compile", "30-numerics"):
        write(tmp_path / "stages" / f"{name}.toml", '[[check]]\nkind = "command"\nrun = "true"\n')
    plan = load_plan(tmp_path / "stages")
    assert [s.name for s in plan.stages] == ["compile", "numerics", "bench"]
    assert plan.not_configured() == tuple(
        n for n in DEFAULT_ORDER if n not in ("compile", "numerics", "bench")
    )


def test_builtin_plan_loads() -> None:
    plan = load_plan(None)
    assert plan.builtin
    assert [s.name for s in plan.stages][0] in DEFAULT_ORDER


def test_hosts_are_labels_with_their_runners_labels(tmp_path: Path) -> None:
    """`[hosts]`, the CI workflow's matrix: read in order, each label checked, since it names a
    folder of a fleet report and a CI artifact; a host with no runner labels is refused."""
    arms = '[arms.pinned]\ninstallable = "x"\n'
    write(tmp_path / "qualify.toml", arms)
    assert load_config(tmp_path).hosts == {}
    write(
        tmp_path / "qualify.toml",
        arms + '[hosts]\nmi350 = ["self-hosted", "mi350"]\ncpu = ["ubuntu-latest"]\n',
    )
    assert load_config(tmp_path).hosts == {"mi350": ("self-hosted", "mi350"), "cpu": ("ubuntu-latest",)}
    for entry, said in (
        ('"gfx 1151" = ["self-hosted"]', r"qualify.toml:5: hosts.gfx 1151: the host label 'gfx 1151'"),
        ("gfx1151 = []", r"qualify.toml:5: hosts.gfx1151: expected the labels of the runners"),
        ('gfx1151 = "self-hosted"', r"qualify.toml:5: hosts.gfx1151: expected a list of strings"),
        ('gfx1151 = ["self-hosted", "a\\u202eb"]', r"hosts.gfx1151\[1\]: the runner label holds U\+202E"),
    ):
        write(tmp_path / "qualify.toml", f"{arms}\n[hosts]\n{entry}\n")
        with pytest.raises(ConfigError, match=said):
            load_config(tmp_path)


TOKEN_NAMES = [
    "ghp_" + "a1b2c3d4e5" * 4,
    "gho_" + "a1b2c3d4e5" * 4,
    "ghs_" + "a1b2c3d4e5" * 4,
    "github_pat_" + "11abcdefgh_0123456789abcd",
    "glpat-" + "abcdefghij0123456789",
    "xoxb-" + "123456789012-abcdefghij",
    "xoxp-" + "123456789012-abcdefghij",
    "hf_" + "abcdefghij0123456789ab",
]


@pytest.mark.parametrize("token", [*TOKEN_NAMES, "AKIA" + "IOSFODNN7EXAMPLE", "smoke_" + TOKEN_NAMES[0]])
def test_an_arm_named_like_an_access_token_is_refused_without_showing_it(tmp_path: Path, token: str) -> None:
    """An arm's name is kept in clear in every record, report and annotation."""
    write(
        tmp_path / "qualify.toml",
        f'[arms.pinned]\ninstallable = ".#default"\n\n[arms."{token}"]\ninstallable = ".#c"\n',
    )
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    said = str(err.value)
    assert f"{tmp_path / 'qualify.toml'}:4: arms." in said and "access token" in said, said
    assert token not in said and "<redacted>" in said, said
    assert err.value.exit_code == ExitCode.USAGE_ERROR


@pytest.mark.parametrize("token", [*TOKEN_NAMES, "run_" + TOKEN_NAMES[4]])
def test_a_check_named_like_an_access_token_is_refused_without_showing_it(tmp_path: Path, token: str) -> None:
    stage = write(
        tmp_path / "stages" / "20-compile.toml",
        f'name = "compile"\n[[check]]\nkind = "command"\nname = "ok"\nrun = "true"\n'
        f'[[check]]\nkind = "command"\nname = "{token}"\nrun = "true"\n',
    )
    with pytest.raises(ConfigError) as err:
        load_plan(tmp_path / "stages")
    said = str(err.value)
    assert f"{stage}:8: check[1].name" in said and "access token" in said, said
    assert token not in said, said


def test_names_that_only_hold_a_token_s_prefix_inside_a_word_are_kept(tmp_path: Path) -> None:
    """`disk-usage-of-the-workspace` holds `sk-…` inside a word: no token."""
    write(
        tmp_path / "stages" / "20-compile.toml",
        'name = "compile"\n[[check]]\nkind = "command"\nname = "disk-usage-of-the-workspace"\nrun = "true"\n',
    )
    assert load_plan(tmp_path / "stages").stages[0].checks[0].name == "disk-usage-of-the-workspace"
    write(
        tmp_path / "qualify.toml",
        '[arms.pinned]\ninstallable = ".#a"\n[arms.task-scheduler-rewrite-2]\ninstallable = ".#b"\n',
    )
    assert "task-scheduler-rewrite-2" in load_config(tmp_path).arms


REMEDY_ARMS = '[arms.pinned]\ninstallable = ".#default"\n[arms.rocm72]\ninstallable = ".#rocm72"\n'


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ('[remedies.t16]\nflags = "-x"\n', "missing required key 'installable'"),
        ('[remedies.t16]\ninstallable = "remedy-true16-off"\n', "names no attribute"),
        ('[remedies.t16]\ninstallable = ".#r"\ncandidate = "rocm71"\n', "names no arm 'rocm71'"),
        ('[remedies.t16]\ninstallable = ".#r"\nflag = "-x"\n', "flag"),
        ('[remedies."t 16"]\ninstallable = ".#r"\n', "is not a plain name"),
    ],
)
def test_a_remedy_that_cannot_be_built_is_refused_naming_its_key(
    tmp_path: Path, table: str, named: str
) -> None:
    write(tmp_path / "qualify.toml", REMEDY_ARMS + table)
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert named in str(err.value) and "qualify.toml" in str(err.value)


def test_remedies_are_read_with_their_flags_and_arm(tmp_path: Path) -> None:
    write(
        tmp_path / "qualify.toml",
        REMEDY_ARMS + '[remedies.t16]\ninstallable = ".#r"\nflags = "-Xclang -x"\ncandidate = "rocm72"\n',
    )
    remedy = load_config(tmp_path).remedies["t16"]
    assert (remedy.installable, remedy.flags, remedy.candidate) == (".#r", "-Xclang -x", "rocm72")
