"""The environment a child process gets. Secrets in it are redacted wherever one is saved, by
the rules of `qualify.core.redaction` (re-exported here for the writers that import them)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from qualify.core.recordredaction import redact_env
from qualify.core.redaction import REDACTED, is_secret, redact_text

__all__ = ["ALLOWLIST", "REDACTED", "child_env", "is_secret", "redact_env", "redact_text"]

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
