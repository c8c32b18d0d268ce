"""A project for the distribution stage: real git repositories and a real flake built by nix
(`builtins.derivation` and the host's /bin/sh; there is no nixpkgs here).

- `fork/`: a git repository holding a flake (a "fork" of a library the engine takes as an
  input), branch `main`, which a test can force-push so that the locked commit leaves it;
- `engine/`: the project, locking `fork` as a `git+file` input. Its pinned arm (`.#default`) is
  the engine built by `tool-1`, its candidate (`.#candidate`) by `tool-2`; each arm's
  `bin/engine` writes the metrics JSON its compile stage judges (the engine's own program,
  as a real engine's test program would), so that the run qualifies before the distribution
  stage. The stages between have nothing of this engine to measure and are declared not
  applicable.

The cache, the mirror and the signing key live in `dist/`, named by the project's variable
`dist`, outside the project's tree.
"""

from __future__ import annotations

import subprocess
import textwrap
import uuid
from pathlib import Path

from nixflakes import git, nix_env

FORK = """{
  outputs = { self }: { lib.tag = "TAG"; };
}
"""

ENGINE = """{
  inputs.fork.url = "git+file://FORK?ref=main";
  outputs = { self, fork }: let
    system = "x86_64-linux";
    tool = n: builtins.derivation {
      name = "tool-${n}"; inherit system; builder = "/bin/sh"; nonce = "NONCE";
      args = [ "-c" "echo tool ${n} > $out" ];
    };
    engine = t: ok: builtins.derivation {
      name = "engine-${fork.lib.tag}"; inherit system; builder = "/bin/sh"; PATH = "/usr/bin:/bin";
      nonce = "NONCE";
      args = [ "-c" ''
        mkdir -p $out/bin
        echo ${t} > $out/toolchain
        head -c 200000 /dev/urandom > $out/weights
        cat > $out/bin/engine <<EOF
        #!/bin/sh
        echo '{"schema_version": 1, "metrics": [{"name": "ok", "unit": "", "higher_is_better": true, "samples": [${ok}, ${ok}, ${ok}]}]}' > "\\$1"
        EOF
        chmod +x $out/bin/engine
      '' ];
    };
  in {
    packages.${system} = {
      default = engine (tool "1") "1";
      candidate = engine (tool "2") "1";
      broken = engine (tool "3") "0";
    };
  };
}
"""

CONFIG = """
[arms.pinned]
installable = ".#default"
[arms.cand]
installable = ".#candidate"
[arms.broken]
installable = ".#broken"
[vars]
dist = "DIST"
"""

STAGES = {
    "10-build.toml": 'name = "build"\n[[check]]\nkind = "nix-build"\nname = "arms"\n',
    "20-compile.toml": textwrap.dedent(
        """\
        name = "compile"
        [[check]]
        kind = "command"
        name = "self-test"
        run = "{bin}/engine {out_file}"
        metrics = true
        limits = { min_ok = 1 }
        """
    ),
    **{
        f"{n}-{name}.toml": f'name = "{name}"\nnot_applicable = "a fixture engine: its self-test is all it has"\n'
        for n, name in ((30, "numerics"), (40, "serving"), (50, "soak"), (60, "bench"))
    },
}

#: The distribution stage a test runs: the three checks as the default plan has them, with the
#: move made by the command that points the default at tool 2.
DISTRIBUTION = """
name = "distribution"
[[check]]
kind = "flake-inputs"
name = "sources"
mirror = "{dist}/sources"
[[check]]
kind = "binary-cache"
name = "cache"
cache = "{dist}/cache"
secret_key_file = "{dist}/cache-key.sec"
[[check]]
kind = "pin-move"
name = "pin-move"
run = "sed -i 's/default = engine (tool \\"1\\")/default = engine (tool \\"2\\")/' flake.nix"
"""


def make_fork(fork: Path, tag: str) -> Path:
    """A git repository holding the fork's flake, whose `lib.tag` is `tag`, on branch main."""
    fork.mkdir(parents=True)
    (fork / "flake.nix").write_text(FORK.replace("TAG", tag))
    git(fork, "init", "-q", "-b", "main")
    git(fork, "add", "-A")
    git(fork, "commit", "-qm", tag)
    return fork


def make_project(root: Path, distribution: str = DISTRIBUTION, arms: str = "") -> Path:
    """`fork/`, `dist/` (a fresh signing key in it) and the committed, locked project under
    `root`: the project's flake is the folder `engine/` of the repository `repo/`, as a flake in
    a folder of a larger repository is (the example's, in qualify's own). `arms`: more arms."""
    fork = make_fork(root / "fork", "fork-1")
    dist = root / "dist"
    dist.mkdir()
    new_key(dist / "cache-key.sec", "engine-cache-1")
    repo = root / "repo"
    project = repo / "engine"
    (project / "stages").mkdir(parents=True)
    flake = ENGINE.replace("FORK", str(fork)).replace("NONCE", uuid.uuid4().hex)
    (project / "flake.nix").write_text(flake)
    (project / "qualify.toml").write_text('plan = "stages"\n' + CONFIG.replace("DIST", str(dist)) + arms)
    for name, body in STAGES.items():
        (project / "stages" / name).write_text(body)
    (project / "stages" / "70-distribution.toml").write_text(distribution)
    (repo / "README").write_text("the engine's repository; its flake is engine/\n")
    (repo / ".gitignore").write_text("runs/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    subprocess.run(["nix", "flake", "lock"], cwd=project, env=nix_env(), check=True, capture_output=True)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "engine")
    return project


def outside(project: Path, name: str) -> Path:
    """`fork` or `dist` of the project `make_project` made."""
    return project.parent.parent / name


def new_key(path: Path, name: str) -> str:
    """A fresh nix signing key written to `path`; its public half."""
    secret = subprocess.run(
        ["nix", "key", "generate-secret", "--key-name", name], env=nix_env(), check=True, capture_output=True
    ).stdout
    path.write_bytes(secret)
    path.chmod(0o600)
    return (
        subprocess.run(
            ["nix", "key", "convert-secret-to-public"],
            input=secret,
            env=nix_env(),
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .strip()
    )


def force_push_away(fork: Path) -> str:
    """Replace `main` of `fork` by an unrelated commit and collect the old one for good, as a
    force-push followed by the server's garbage collection does; the commit that was dropped."""
    old = subprocess.run(
        ["git", "-C", str(fork), "rev-parse", "main"], capture_output=True, text=True, check=True
    )
    git(fork, "checkout", "-q", "--orphan", "rewritten")
    (fork / "flake.nix").write_text(FORK.replace("TAG", "rewritten"))
    git(fork, "add", "-A")
    git(fork, "commit", "-qm", "rewritten")
    git(fork, "branch", "-q", "-M", "rewritten", "main")
    git(fork, "reflog", "expire", "--expire=now", "--all")
    git(fork, "gc", "-q", "--prune=now")
    return old.stdout.strip()
