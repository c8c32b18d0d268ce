"""What a resumed build cannot pass on: run.json keeps a secret nix option, and a token in an
`--override-input`'s URL, redacted, so an attempt that reads them from there must be given them
again rather than hand nix `<redacted>`."""

from __future__ import annotations

from collections.abc import Sequence

from qualify.core.errors import QualifyError
from qualify.core.recordredaction import holds_redacted


def refuse_redacted(nix_settings: dict[str, str]) -> None:
    """A resumed run reads its nix options from run.json, where a secret one was saved
    redacted: nix must not be given `<redacted>` for a token."""
    hidden = sorted(name for name, value in nix_settings.items() if holds_redacted(value))
    if hidden:
        raise QualifyError(
            f"the nix option(s) {', '.join(hidden)} of this run were saved redacted (they hold a "
            "secret), so this attempt cannot pass them on",
            "give them again: "
            + " ".join(f"--nix-option {name}=..." for name in hidden)
            + " (or set them in nix.conf or NIX_CONFIG, which a run never saves in clear)",
        )


def refuse_redacted_overrides(overrides: Sequence[Sequence[str]]) -> None:
    """A resumed run reads its `--override-input`s from run.json, where a URL's token was saved
    redacted: nix must not be given `<redacted>` for it."""
    hidden = [str(name) for name, ref in overrides if holds_redacted(ref)]
    if hidden:
        raise QualifyError(
            f"the --override-input(s) {', '.join(hidden)} of this run were saved redacted (their URL "
            "holds a secret), so this attempt cannot pass them on",
            "give them again: " + " ".join(f"--override-input {name}=..." for name in hidden),
        )
