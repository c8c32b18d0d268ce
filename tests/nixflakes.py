"""Fixture flakes for the build stage: real nix, no nixpkgs.

Two "nixpkgs-like" path inputs hold real derivations (built with `builtins.derivation` and
/bin/sh) named like the ROCm stack, so closures, toolchains and inputs can be checked against
known answers: rocm-core 7.2.3 vs 10.1.0, clang-20.0.0-rocm vs clang-22.0.0-rocm, an
identical package, a rebuilt same-version package, an added and a removed one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
import uuid
from pathlib import Path

NIX_CONFIG = "experimental-features = nix-command flakes\nbuild-users-group =\nsubstituters ="

PKGS = """
{{
  outputs = {{ self }}: let
    mk = name: script: deps: builtins.derivation {{
      inherit name; system = "x86_64-linux"; builder = "/bin/sh";
      PATH = "/usr/bin:/bin"; nonce = "{nonce}";
      args = [ "-c" ("mkdir -p $out; echo ${{name}} > $out/name; " + script) ];
      deps = deps;
    }};
  in {{
    legacyPackages.x86_64-linux = rec {{
{packages}
    }};
  }};
}}
"""

ROCM7 = """
      bash = mk "bash-5.2" "echo rocm7-base > $out/flavour" [];
      zlib = mk "zlib-1.3" "" [];
      openssl = mk "openssl-3.0.14" "echo built-against-7 > $out/how" [ bash ];
      rocm-core = mk "rocm-core-7.2.3" "" [ bash ];
      rocm-runtime = mk "rocm-runtime-7.2.3" "" [ rocm-core ];
      rocm-smi = mk "rocm-smi-7.2.3" "" [ rocm-core ];
      clang-rocm = mk "clang-20.0.0-rocm" "" [ bash ];
"""

ROCM10 = """
      bash = mk "bash-5.2" "echo rocm10-base > $out/flavour" [];
      zlib = mk "zlib-1.3" "" [];
      openssl = mk "openssl-3.0.14" "echo built-against-10 > $out/how" [ bash ];
      rocm-core = mk "rocm-core-{core}" "" [ bash ];
      rocm-runtime = mk "rocm-runtime-10.1.0" "" [ rocm-core ];
      hipblaslt = mk "hipblaslt-10.1.0" "" [ rocm-core ];
      clang-rocm = mk "clang-22.0.0-rocm" "" [ bash ];
"""

PROJECT = """
{{
  inputs.nixpkgs.url = "path:{rocm7}";
  inputs.nixpkgs-rocm10.url = "path:{rocm10}";
  outputs = {{ self, nixpkgs, nixpkgs-rocm10 }}: let
    engine = name: p: extra: script: builtins.derivation {{
      inherit name; system = "x86_64-linux"; builder = "/bin/sh"; PATH = "/usr/bin:/bin";
      nonce = "{nonce}";
      args = [ "-c" ''
        mkdir -p $out/bin
        echo ${{p.rocm-runtime}} > $out/bin/runtime-ref
        echo ${{p.zlib}} > $out/bin/zlib-ref
        echo ${{p.openssl}} > $out/bin/openssl-ref
        ${{script}}
      '' ];
      toolchain = [ p.clang-rocm p.rocm-core ] ++ extra;
    }};
    p7 = nixpkgs.legacyPackages.x86_64-linux;
    p10 = nixpkgs-rocm10.legacyPackages.x86_64-linux;
  in {{
    packages.x86_64-linux = {{
      default = engine "engine-1.0" p7 [ p7.rocm-smi ] "";
      rocm10 = engine "engine-1.0" p10 [ p10.hipblaslt ] "";
      reference = engine "engine-ref-1.0" p7 [] "";
      broken = engine "engine-1.0" p10 [] "echo 'kernel.hip:12: error: vgpr overflow' >&2; exit 1";
      mixed = engine "engine-1.0" p10 [ p7.rocm-runtime ] "";
    }};
    qualify.reference.inputs = [ "nixpkgs" ];
  }};
}}
"""

CONFIG = """
[arms.pinned]
installable = ".#default"
[arms.rocm10]
installable = ".#rocm10"
[arms.broken]
installable = ".#broken"
[arms.mixed]
installable = ".#mixed"
[arms.reference]
installable = ".#reference"
"""


def nix_env() -> dict[str, str]:
    return {**os.environ, "NIX_CONFIG": NIX_CONFIG}


def have_nix() -> bool:
    return shutil.which("nix") is not None and shutil.which("nix-store") is not None


def _pkgs(path: Path, packages: str, nonce: str) -> None:
    path.mkdir(parents=True)
    (path / "flake.nix").write_text(PKGS.format(nonce=nonce, packages=packages))


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=q@example.invalid", "-c", "user.name=qualify", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def make_rocm_project(root: Path, plan: str) -> Path:
    """A committed git project with two path inputs and the arms of CONFIG."""
    nonce = uuid.uuid4().hex
    _pkgs(root / "pkgs-rocm7", ROCM7, nonce)
    _pkgs(root / "pkgs-rocm10", ROCM10.format(core="10.1.0"), nonce)
    _pkgs(root / "pkgs-rocm10-fix", ROCM10.format(core="10.1.1"), nonce)
    project = root / "engine"
    (project / "stages").mkdir(parents=True)
    (project / "flake.nix").write_text(
        PROJECT.format(rocm7=root / "pkgs-rocm7", rocm10=root / "pkgs-rocm10", nonce=nonce)
    )
    (project / "qualify.toml").write_text('plan = "stages"\n' + CONFIG)
    (project / "stages" / "10-build.toml").write_text(textwrap.dedent(plan))
    (project / ".gitignore").write_text("runs/\n")
    git(project, "init", "-q")
    git(project, "add", "-A")  # nix sees only the files git tracks
    subprocess.run(["nix", "flake", "lock"], cwd=project, env=nix_env(), check=True, capture_output=True)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "engine")
    return project
