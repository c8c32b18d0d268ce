"""Stage 10, build: nix builds of every arm, closure diff, toolchain components, the nix-build kind."""
