"""The run's build options (`--allow-dirty`, `--override-input`, `--nix-option`) are read by the
build as a typed value: as the run saved them, or refused naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from qualify.build.runoptions import BuildOptions
from qualify.core.errors import RunStoreError


def test_the_saved_options_read_as_pairs() -> None:
    saved = {
        "allow_dirty": True,
        "override_inputs": [["llama-cpp", "github:ggml-org/llama.cpp/b1"]],
        "nix_options": [["max-jobs", "4"], ["access-tokens", "<redacted>"]],
    }
    options = BuildOptions.of(saved)
    assert options.allow_dirty is True
    assert options.override_inputs == (("llama-cpp", "github:ggml-org/llama.cpp/b1"),)
    assert options.nix_options == (("max-jobs", "4"), ("access-tokens", "<redacted>"))
    assert BuildOptions.of({}) == BuildOptions(False, (), ())


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"allow_dirty": "yes"}, r"options\.allow_dirty: expected true or false"),
        ({"nix_options": [["max-jobs"]]}, r"options\.nix_options: expected a list of \[name, value\] pairs"),
        ({"override_inputs": "llama-cpp=x"}, r"options\.override_inputs: expected a list"),
        ({"nix_options": [["cores", 4]]}, r"options\.nix_options: expected"),
    ],
)
def test_an_option_of_the_wrong_type_is_refused_naming_the_key(options: dict[str, Any], said: str) -> None:
    with pytest.raises(RunStoreError, match=r"run\.json: " + said):
        BuildOptions.of(options)
