"""The run's build options (`--allow-dirty`, `--override-input`, `--nix-option`) are one type,
read by the run record and the build alike: as the run saved them, or refused naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from qualify.checks.runoptions import RunOptions
from qualify.core.errors import RunStoreError


def test_the_saved_options_read_as_pairs() -> None:
    saved = {
        "allow_dirty": True,
        "override_inputs": [["llama-cpp", "github:ggml-org/llama.cpp/b1"]],
        "nix_options": [["max-jobs", "4"], ["access-tokens", "<redacted>"]],
    }
    options = RunOptions.of(saved)
    assert options.allow_dirty is True
    assert options.override_inputs == [["llama-cpp", "github:ggml-org/llama.cpp/b1"]]
    assert options.nix_options == [["max-jobs", "4"], ["access-tokens", "<redacted>"]]
    assert options.as_json() == saved
    assert RunOptions.of({}) == RunOptions() and RunOptions.of({}).as_json() == {}


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"allow_dirty": "yes"}, r"options\.allow_dirty is a string, not true or false"),
        (
            {"nix_options": [["max-jobs"]]},
            r"options\.nix_options\[0\] is a list of 1, not a \[name, value\] pair",
        ),
        ({"override_inputs": "llama-cpp=x"}, r"options\.override_inputs is a string, not a list"),
        ({"nix_options": [["cores", 4]]}, r"options\.nix_options\[0\]\[1\] is a number, not a string"),
        ({"allow_dirt": True}, r"options\.allow_dirt: not a field this qualify knows"),
    ],
)
def test_an_option_of_the_wrong_type_is_refused_naming_the_key(options: dict[str, Any], said: str) -> None:
    with pytest.raises(RunStoreError, match=r"run\.json: " + said):
        RunOptions.of(options)
