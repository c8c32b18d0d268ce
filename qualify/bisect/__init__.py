"""Bisecting a toolchain move: over an ordered series of toolchains between the pinned arm and
the candidate, the first step at which a gate flips (docs/bisect.md). The search and its saved
state; building and running each step is the caller's."""
