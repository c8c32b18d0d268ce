"""Bisecting a toolchain move: over an ordered series of toolchains between the pinned arm and
the candidate, the first step at which a gate flips (docs/bisect.md). The search and its saved
state; building and running each step is the caller's."""

#: How many times an UNDECIDED step is measured again before it counts as unknown (here, where
#: `qualify bisect --help` reads it without the bisect's records).
DEFAULT_RETRIES = 2
