"""qualify: qualify a toolchain move of a GPU inference engine packaged as a Nix flake."""

__version__ = "0.1.0"
