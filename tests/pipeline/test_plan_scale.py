"""Loading a plan reads each stage file's text once, whatever its number of checks: the lines
errors point at are found in one pass, and only when an error needs one. (The time is measured
by `benchmarks/plan_scale.py`; here the passes are counted, which a busy machine cannot skew.)

The lines themselves are checked on the shapes a stage file takes: arrays of tables, sub-tables
of their last element, inline tables, profiles, and multi-line strings and arrays whose lines
look like keys or headers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qualify.core import tomlfile
from qualify.core.errors import ConfigError
from qualify.core.tomlfile import key_lines, locate
from qualify.pipeline import plan as plan_module
from qualify.pipeline.plan import load_plan


class CountedText(str):
    """A stage file's text that counts the passes made over its lines."""

    passes = 0

    def splitlines(self, keepends: bool = False) -> list[str]:  # type: ignore[override]
        CountedText.passes += 1
        return super().splitlines(keepends)


def many_checks(checks: int, bad_last: str | None = None) -> str:
    lines = ['name = "many"']
    for n in range(checks):
        lines += ["[[check]]", 'kind = "command"', f'name = "c{n}"', 'run = "true"', "[check.limits]"]
        lines.append(bad_last if bad_last and n == checks - 1 else "max_seconds = 1")
    lines += [f"[profiles.quick.check.c{n}]\ntimeout = 30" for n in range(checks)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> None:
    def read_counted(path: Path) -> tomlfile.TomlDoc:
        doc = tomlfile.read_toml(path)
        return tomlfile.TomlDoc(doc.path, CountedText(doc.text), doc.data)

    CountedText.passes = 0
    monkeypatch.setattr(plan_module, "read_toml", read_counted)


@pytest.mark.usefixtures("counted")
def test_a_plan_of_many_checks_is_read_in_one_pass(tmp_path: Path) -> None:
    """300 checks and a profile over each: no pass over the lines when nothing is wrong (the
    old loader made one per check, and one per profile entry, twice)."""
    (tmp_path / "10-many.toml").write_text(many_checks(300))
    plan = load_plan(tmp_path, "quick")
    assert len(plan.stages[0].checks) == 300
    assert all(c.timeout_s == 30 for c in plan.stages[0].checks)
    assert CountedText.passes == 0


@pytest.mark.usefixtures("counted")
def test_an_error_in_the_last_check_costs_one_pass_and_names_its_line(tmp_path: Path) -> None:
    text = many_checks(300, bad_last="max_seconds = nan")
    (tmp_path / "10-many.toml").write_text(text)
    with pytest.raises(ConfigError) as err:
        load_plan(tmp_path)
    line = text.splitlines().index("max_seconds = nan") + 1
    assert f"10-many.toml:{line}: check[299].limits.max_seconds:" in err.value.message
    assert CountedText.passes == 1


STAGE = '''\
name = "x"
[[check]]
kind = "command"
run = """
[not.a.header]
timeout = 1
"""
args = [
  "--x=1",
  ["nested"],
]
limits = { max_a = 1, min_b = 2 }
[check.vars]
path = 'C:\\'
[[check]]
kind = "kld"
[check.limits]
max_mean_kld = 0.1
[profiles.quick.check.c1]
timeout = 3
'''


@pytest.mark.parametrize(
    ("path", "line"),
    [
        (("name",), 1),
        (("check", 0), 2),
        (("check", 0, "run"), 4),
        (("check", 0, "timeout"), 2),  # only inside the string: the check's header
        (("check", 0, "args"), 8),
        (("check", 0, "limits", "max_a"), 12),  # inside an inline table: its line
        (("check", 0, "vars", "path"), 14),
        (("check", 1, "kind"), 16),
        (("check", 1, "limits", "max_mean_kld"), 18),
        (("profiles", "quick", "check", "c1", "timeout"), 20),
        (("profiles", "quick", "check", "c1", "alpha"), 19),  # merged from elsewhere: the table
        (("profiles", "quick"), 19),
        (("nowhere",), None),
    ],
)
def test_each_key_is_found_on_its_line(path: tuple[str | int, ...], line: int | None) -> None:
    assert locate(STAGE, path) == line


def test_a_header_inside_a_multi_line_string_is_not_a_table() -> None:
    assert ("not", "a", "header") not in key_lines(STAGE)
