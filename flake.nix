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
      runtimeDeps =
        ps: with ps; [
          typer
          rich
          numpy
          pandas
          pyarrow
          scipy
          jinja2
          msgpack
          pyelftools
          zstandard
          lz4
          matplotlib
          httpx
          jsonschema
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
          pythonImportsCheck = [
            "qualify"
            "qualify.cli"
            "qualify.kinds"
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

      apps = forAllSystems (system: pkgs: {
        default = {
          type = "app";
          program = "${self.packages.${system}.default}/bin/qualify";
        };
      });

      devShells = forAllSystems (system: pkgs: {
        default = pkgs.mkShell {
          packages = [
            (pkgs.python3.withPackages (
              ps:
              runtimeDeps ps
              ++ (with ps; [
                hatchling
                pytest
                hypothesis
                mypy
                pandas-stubs
              ])
            ))
            pkgs.ruff
            pkgs.nix
            pkgs.git
          ];
        };
      });
    };
}
