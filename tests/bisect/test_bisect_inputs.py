"""`qualify bisect` over the revisions of one flake input, against real nix and real git: each
step builds the candidate arm with `--override-input lib git+file:///…?rev=R` through the
default plan's `nix-build` stage, and a `command` check reads what the build made.

The input is a git repository holding a tiny flake (no nixpkgs: `builtins.derivation` and
/bin/sh) whose package writes the number in its file `level`, one more at each commit. The
project's flake copies that file into its own package, locked at the first commit; the compile
stage fails the arm whose `level` is at or above the threshold, so the flip lies at a known
commit."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import qualify_proc
from nixflakes import NIX_CONFIG, git, have_nix

from qualify.bisect.flakerefs import at_revision, rev_problem

# Alone, in one process: two of these bisects side by side (one per worker) once hung 300 s each
# in nix's dry run of a `git+file` override.
pytestmark = [
    pytest.mark.nix,
    pytest.mark.alone,
    pytest.mark.skipif(not have_nix(), reason="nix is not installed"),
]

COMMITS = 7
THRESHOLD = 4

LIB = """{
  outputs = { self }: {
    packages.x86_64-linux.default = builtins.derivation {
      name = "lib"; system = "x86_64-linux"; builder = "/bin/sh"; PATH = "/usr/bin:/bin";
      args = [ "-c" "mkdir -p $out; cp ${./level} $out/level" ];
    };
  };
}
"""

ENGINE = """{
  inputs.lib.url = "git+file://%s";
  outputs = { self, lib }: {
    packages.x86_64-linux.default = builtins.derivation {
      name = "engine"; system = "x86_64-linux"; builder = "/bin/sh"; PATH = "/usr/bin:/bin";
      args = [ "-c" "mkdir -p $out; cp ${lib.packages.x86_64-linux.default}/level $out/level" ];
    };
  };
}
"""

BUILD = 'name = "build"\n[[check]]\nkind = "nix-build"\nname = "arms"\n'
COMPILE = (
    'name = "compile"\n[[check]]\nkind = "command"\nname = "level"\n'
    f"run = \"sh -c 'test $(cat {{out}}/level) -lt {THRESHOLD}'\"\n"
)
CONFIG = """plan = "stages"
candidate = "next"
[arms.pinned]
installable = ".#default"
[arms.next]
installable = ".#default"
"""


def env() -> dict[str, str]:
    return {**os.environ, "NIX_CONFIG": NIX_CONFIG}


def head(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def engine(root: Path, series: str) -> tuple[Path, list[str]]:
    """The input's repository (COMMITS commits, level 0 to COMMITS-1, tagged v0…) and the
    project, locked at its first commit, with `series` appended to qualify.toml."""
    lib = root / "lib"
    lib.mkdir()
    (lib / "flake.nix").write_text(LIB)
    revs = []
    project = root / "engine"
    for level in range(COMMITS):
        (lib / "level").write_text(f"{level}\n")
        if level == 0:
            git(lib, "init", "-q", "-b", "main")
        git(lib, "add", "-A")
        git(lib, "commit", "-qm", f"level {level}")
        git(lib, "tag", f"v{level}")
        revs.append(head(lib))
        if level == 0:
            (project / "stages").mkdir(parents=True)
            (project / "flake.nix").write_text(ENGINE % lib)
            (project / ".gitignore").write_text("runs/\n")
            git(project, "init", "-q")
            git(project, "add", "-A")
            subprocess.run(["nix", "flake", "lock"], cwd=project, env=env(), check=True, capture_output=True)
    (project / "stages" / "10-build.toml").write_text(BUILD)
    (project / "stages" / "20-compile.toml").write_text(COMPILE)
    (project / "qualify.toml").write_text(CONFIG + series)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "engine")
    return project, revs


def bisect(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return qualify_proc("bisect", *args, "--project", str(project), env=env())


def check_found(project: Path, revs: list[str], result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    answer = document["answer"]
    assert answer["finding"] == "found", answer
    assert (answer["good"], answer["bad"]) == (THRESHOLD - 1, THRESHOLD)
    assert document["series"] == [rev[:12] for rev in revs]
    assert answer["line"].startswith(f"FOUND: first bad: {revs[THRESHOLD][:12]} (step {THRESHOLD})")
    # Every probe built the candidate at its own revision, and recorded which.
    for probe in document["probes"]:
        index = document["series"].index(probe["step"])
        rev = revs[index]
        assert probe["evidence"]["revision"] == rev and probe["evidence"]["input"] == "lib"
        run = Path(probe["evidence"]["run"])
        saved = json.loads((run / "run.json").read_text())
        assert saved["options"]["override_inputs"] == [
            ["lib", f"git+file://{project.parent / 'lib'}?rev={rev}"]
        ]
        roles = saved["roles"]
        assert roles["candidate"]["arm"] == "next" and roles["pinned"]["arm"] == "pinned"
        # What the step built is the input at that revision; pinned is the locked first commit.
        assert Path(roles["candidate"]["out"], "level").read_text() == f"{index}\n"
        assert Path(roles["pinned"]["out"], "level").read_text() == "0\n"
    return document


def test_the_flip_is_found_at_the_listed_revision_that_breaks(tmp_path: Path) -> None:
    project, revs = engine(tmp_path, "")
    with (project / "qualify.toml").open("a") as handle:
        listed = ", ".join(f'"{rev}"' for rev in revs)
        handle.write(f'[series.lib]\ninput = "lib"\nrevisions = [{listed}]\n')
    git(project, "commit", "-qam", "series")
    document = check_found(project, revs, bisect(project, "lib", "--gate", "compile", "--json"))
    assert document["context"]["input"] == "lib" and document["context"]["candidate"] == "next"


def test_the_revisions_between_from_and_to_are_read_from_git(tmp_path: Path) -> None:
    """`from` a tag, `to` a branch: the steps are every commit between them, oldest first."""
    project, revs = engine(tmp_path, '[series.lib]\ninput = "lib"\nfrom = "v0"\nto = "main"\n')
    check_found(project, revs, bisect(project, "lib", "--gate", "compile", "--json"))


#: Two revisions of the right form: each bad series is refused before any is looked up.
LISTED = f'revisions = ["{"a" * 40}", "{"b" * 40}"]\n'


@pytest.mark.parametrize(
    ("series", "key", "says"),
    [
        ('arms = ["pinned", "next"]\ninput = "lib"\n' + LISTED, "series.lib", "both `arms` and `input`"),
        ('input = "libb"\n' + LISTED, "series.lib.input", "has no input 'libb' (did you mean \"lib\"?)"),
        ('input = "lib"\nurl = "path:/nowhere"\n' + LISTED, "series.lib.url", "cannot take a rev"),
        ('input = "lib"\nurl = "github:o/r"\nfrom = "v0"\nto = "v6"\n', "series.lib.from", "revisions = "),
    ],
)
def test_a_bad_series_is_refused_naming_its_key(tmp_path: Path, series: str, key: str, says: str) -> None:
    project, _ = engine(tmp_path, "[series.lib]\n" + series)
    result = bisect(project, "lib", "--gate", "compile")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "qualify.toml" in result.stderr and key in result.stderr and says in result.stderr
    assert not (project / "runs").exists()


REV = "c" * 40


@pytest.mark.parametrize(
    ("url", "pinned"),
    [
        ("git+file:///src/lib", f"git+file:///src/lib?rev={REV}"),
        ("git+https://example.org/lib?ref=dev", f"git+https://example.org/lib?ref=dev&rev={REV}"),
        ("/src/lib", f"git+file:///src/lib?rev={REV}"),
        ("github:o/r", f"github:o/r/{REV}"),
        ("github:o/r/main?dir=sub", f"github:o/r/{REV}?dir=sub"),
    ],
)
def test_each_kind_of_reference_takes_the_rev_as_nix_spells_it(url: str, pinned: str) -> None:
    assert rev_problem(url) is None
    assert at_revision(url, REV) == pinned


@pytest.mark.parametrize(
    "url", ["path:/src/lib", f"git+file:///src/lib?rev={REV}", "https://example.org/lib.tar.gz", "github:o"]
)
def test_a_reference_that_cannot_take_a_rev_is_refused(url: str) -> None:
    assert rev_problem(url) is not None


def test_a_stopped_input_bisect_resumes_and_a_moved_branch_is_refused(tmp_path: Path) -> None:
    """The state is saved after every probe; cut back to its first two (where a bisect stopped
    there left it), `--run ID` probes only the steps still open, each step's attempts counted on
    from the saved ones, and answers the same. Once the input's `to` branch has moved, the
    revisions between `from` and `to` are other steps: the resume is refused (exit 4)."""
    project, revs = engine(tmp_path, '[series.lib]\ninput = "lib"\nfrom = "v0"\nto = "main"\n')
    first = check_found(project, revs, bisect(project, "lib", "--gate", "compile", "--json"))
    folder = Path(first["probes"][0]["evidence"]["run"]).parents[2]  # <bisect>/steps/NN-step/<run>
    saved = json.loads((folder / "bisect.json").read_text())
    keep = ("schema_version", "mode", "series", "retries", "context")
    cut = {**{k: saved[k] for k in keep}, "probes": saved["probes"][:2]}
    (folder / "bisect.json").write_text(json.dumps(cut))
    resumed = check_found(
        project, revs, bisect(project, "lib", "--gate", "compile", "--run", folder.name, "--json")
    )
    assert resumed["answer"] == first["answer"]
    assert resumed["probes"][:2] == first["probes"][:2]  # kept as they were, not probed again
    assert [p["step"] for p in resumed["probes"]] == [p["step"] for p in first["probes"]]
    assert all(p["attempt"] == 1 for p in resumed["probes"])
    lib = tmp_path / "lib"
    (lib / "level").write_text(f"{COMMITS}\n")
    git(lib, "commit", "-qam", f"level {COMMITS}")
    moved = bisect(project, "lib", "--gate", "compile", "--run", folder.name)
    assert moved.returncode == 4 and "another series" in moved.stderr, moved.stderr
