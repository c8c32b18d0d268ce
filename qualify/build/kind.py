"""`nix-build`: build every role's arm from one locked revision; closures, toolchains, inputs.

Measures: the flake resolved once (`nix flake metadata`), a dry run of every arm (what will be
built, shared, fetched), then each distinct arm built from the locked URL with an out-link
under `gcroots/<role>`, per-derivation wall times from the internal-json log, the runtime
closure (paths, NAR sizes) and the build-time closure (derivations), the toolchain components
found there, and which flake inputs each arm uses. Where the plan has a `binary-cache` check
whose cache is on this host and whose public key is known (its `public_key`, or the half of its
secret key file), every arm's nix calls substitute from that cache (`require-sigs` on, only that
key added to the trusted ones); each role records the paths substituted, by substituter, and
the derivations built.

Verdict:
- ERROR: nix is missing, the flake cannot be resolved, the tree is dirty without
  `--allow-dirty`, or the pinned or reference arm failed to build (no baseline).
- FAIL: the candidate failed to build (the failing derivation named, with its log tail), or it
  holds two versions of a single-version toolchain component (a mixed toolchain).
- WARN: a dirty tree was allowed; an arm is not from the project's flake; the pinned or
  reference arm holds a mixed toolchain; no toolchain component was found in an arm; the plan's
  cache is on this host but not used (no public key known here), or nix did not take paths from
  it (not signed by the plan's key, a failed substitution, a daemon that ignored it).
- PASS otherwise.

What it cannot prove: that the toolchain versions are what actually compiled each object
(a derivation may bring a compiler it never calls); inputs are attributed by the flake's own
declaration or by a probe package, and may stay "unknown".
"""

from __future__ import annotations

from qualify.build.params import BuildParams
from qualify.checks.base import CheckKind

KIND = CheckKind(
    name="nix-build",
    summary="build every role's arm through nix from one locked revision; closures and toolchains",
    params=BuildParams.declared(),
    verdict_rules=(
        "FAIL if the candidate fails to build or holds a mixed toolchain; ERROR if nix, the "
        "flake, a dirty tree or the baseline's build stops the check; WARN for an allowed dirty "
        "tree, a pre-existing mixed toolchain in the baseline, or the plan's cache here but not "
        "served (no key known, unsigned paths, a failed substitution); PASS otherwise"
    ),
    limits=(),
    builds_arms=True,
)
