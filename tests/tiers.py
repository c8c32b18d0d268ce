"""The marks a test gets from the fixtures it uses.

A test gets the marks of every fixture it uses, directly or through another fixture
(`item.fixturenames` is the closure), so a new test on `example_runs` is marked `example`,
`nix`, `model` and `slow` without anyone remembering to say so. A test that runs nix or reads
the model by other means (its own `nix build`, a helper) carries the mark by hand.

Loaded by tests/conftest.py as a plugin (`pytest_plugins`).
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

#: Fixture -> the marks of every test that uses it, directly or through other fixtures. Names
#: are matched across the suite: a fixture listed here has a name no other fixture has.
FIXTURE_MARKS: dict[str, tuple[str, ...]] = {
    # The llama.cpp example's three arms through nix (about 21 minutes on 2 cores, once per
    # store), after its setup.sh made the model and corpus; example_runs, example_kvq4_run and
    # every fixture built on them (llama_pair) run on them.
    "example_outs": ("example", "nix", "model", "slow"),
    # The c-kernels example's arms through nix, and its engine built from its sources alone.
    "c_kernels_outs": ("example", "nix", "slow"),
    "built_engine": ("example", "nix", "slow"),
    # The fixture flakes of tests/nixflakes.py, locked and built by real nix.
    "rocm_project": ("nix",),
    "rocm_run": ("nix",),
    # A nix remote builder on loopback.
    "remote_builder": ("nix",),
}


def marks_for(fixturenames: Iterable[str]) -> set[str]:
    """The marks a test using these fixtures gets."""
    return {mark for name in fixturenames for mark in FIXTURE_MARKS.get(name, ())}


@pytest.hookimpl(tryfirst=True)  # before -m deselects: it reads these marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for mark in sorted(marks_for(item.fixturenames)):
            item.add_marker(mark)
