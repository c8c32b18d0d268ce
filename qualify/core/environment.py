"""The environment a child process gets, and redaction of secrets wherever one is saved."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping

#: Variables a child inherits from qualify's own environment. Everything else must be named
#: by the project (`inherit_env`) or set by the arm or check, so a run does not depend on
#: whatever the maintainer's shell happens to export.
ALLOWLIST = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TZ",
    "TMPDIR",
    "NIX_CONFIG",
    "NIX_PATH",
    "NIX_REMOTE",
    "NIX_SSL_CERT_FILE",
    # Remote builders: nix's ssh options and the ssh agent that holds the builder's key.
    "NIX_SSHOPTS",
    "SSH_AUTH_SOCK",
    "SSL_CERT_FILE",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
    # GPU selection must follow the maintainer's choice of device.
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
)

SECRET_PATTERNS = ("*TOKEN*", "*KEY*", "*SECRET*", "*PASSWORD*")
REDACTED = "<redacted>"


def is_secret(name: str) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_PATTERNS)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` with the values of secret-looking variables replaced."""
    return {k: (REDACTED if is_secret(k) else v) for k, v in env.items()}


def redact_text(text: str, env: Mapping[str, str]) -> str:
    """Replace the values of secret variables in free text (an echoed command line)."""
    for name, value in env.items():
        if is_secret(name) and len(value) >= 4:
            text = text.replace(value, REDACTED)
    return text


def child_env(
    *layers: Mapping[str, str], inherit: Iterable[str] = (), parent: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The allowlisted part of the parent environment, plus `inherit`, then `layers` in order."""
    source = os.environ if parent is None else parent
    names = {*ALLOWLIST, *inherit}
    env = {k: v for k, v in source.items() if k in names or k.startswith("LC_")}
    for layer in layers:
        env.update(layer)
    return env
