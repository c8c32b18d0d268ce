"""The one error root of qualify, and the process exit codes.

Everything below the CLI raises a `QualifyError` (or a subclass); `cli.py` catches it once,
renders message and hint, and exits with the error's code. Nothing below the CLI calls
`sys.exit`.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes of `qualify`, as docs/design.md lists them."""

    QUALIFIED = 0
    NOT_QUALIFIED = 1
    HARNESS_ERROR = 2  # qualify itself could not go on
    INCOMPLETE = 3
    USAGE_ERROR = 4
    INTERRUPTED = 130


class QualifyError(Exception):
    """An error qualify can explain: what went wrong and what to do about it."""

    exit_code: ExitCode = ExitCode.HARNESS_ERROR

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\nhint: {self.hint}"


class ConfigError(QualifyError):
    """A configuration or plan file is wrong; the message names file, key and expectation."""

    exit_code = ExitCode.USAGE_ERROR


class UsageError(QualifyError):
    """The command line asks for something that cannot be done (unknown stage, arm, run)."""

    exit_code = ExitCode.USAGE_ERROR


#: What a refusal of a run folder's file tells the user to do: the file is not as qualify wrote it.
RUN_FOLDER_HINT = "this run folder was not written by qualify as it is; use the run it came from"


class RunStoreError(QualifyError):
    """A run directory is unreadable, locked by another writer, or from a newer qualify."""


class ToolMissing(QualifyError):
    """An executable a command needs is not on PATH."""


class PlaceholderError(QualifyError):
    """A command template names a placeholder that has no value for this role."""
