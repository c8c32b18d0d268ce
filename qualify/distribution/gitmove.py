"""The pin's move in git: a clean clone of the project's revision to make it in, and the change
as one commit written out by `git format-patch`, so that a maintainer applies it with `git am`
and the qualification summary comes with it as its message.

The clone shares the project's objects (`--shared`) and never touches the project's own
repository: no branch, worktree or ref is made there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qualify.core import process
from qualify.core.environment import child_env
from qualify.core.errors import QualifyError
from qualify.core.outputpump import LineCallback

#: Who a patch is from where the project's git has no identity configured.
FALLBACK_IDENTITY = ("qualify", "qualify@localhost")


@dataclass(frozen=True)
class Git:
    """git commands in one repository, logged to one file."""

    repo: Path
    log: Path
    echo: LineCallback | None = None

    def run(self, *args: str, identity: tuple[str, str] | None = None) -> str:
        who = ["-c", f"user.name={identity[0]}", "-c", f"user.email={identity[1]}"] if identity else []
        argv = ["git", "-C", str(self.repo), *who, *args]
        done = process.run(
            argv,
            log=self.log,
            env=_env(),
            timeout_s=600,
            echo=self.echo,
            separate_stdout=True,
            privileged=True,  # qualify's git in qualify's repositories (the project's, its clone)
        )
        if not done.ok:
            said = " / ".join(line.strip() for line in done.output_tail[-4:] if line.strip())
            raise QualifyError(f"`git {args[0]}` failed ({done.describe()}): {said}")
        return done.stdout or ""


def _env() -> dict[str, str]:
    """git with no user configuration of the machine's to surprise it (a hook, a pager, a
    signing program): only the identity and the paths qualify gives it."""
    return {**child_env(), "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat"}


def toplevel(folder: Path) -> Path:
    """The root of the git checkout `folder` is in, or a QualifyError."""
    code, text = process.capture(
        ["git", "-C", str(folder), "rev-parse", "--show-toplevel"], env=_env(), privileged=True
    )
    if code != 0:
        raise QualifyError(
            f"{folder} is not in a git checkout: the pin's move is a patch against the project's revision",
            "keep the project in git (the build records its revision)",
        )
    return Path(text.strip())


def head(repo: Path) -> str | None:
    code, text = process.capture(["git", "-C", str(repo), "rev-parse", "HEAD"], env=_env(), privileged=True)
    return text.strip() if code == 0 else None


def identity(repo: Path) -> tuple[str, str]:
    """The project's own git identity (the patch is its maintainer's to apply), else qualify's."""
    values = []
    for key in ("user.name", "user.email"):
        code, text = process.capture(["git", "-C", str(repo), "config", key], env=_env(), privileged=True)
        values.append(text.strip() if code == 0 else "")
    return (values[0], values[1]) if all(values) else FALLBACK_IDENTITY


def clone(source: Path, revision: str, into: Path, log: Path, echo: LineCallback | None) -> Git:
    """A clean clone of `source` at `revision`, its objects shared with `source`."""
    Git(source, log, echo).run("clone", "--quiet", "--shared", "--no-checkout", str(source), str(into))
    made = Git(into, log, echo)
    made.run("checkout", "--quiet", "--detach", revision)
    return made


def commit(git: Git, message: str, who: tuple[str, str]) -> list[str]:
    """Every change in the clone as one commit with `message`; the files it changes (none:
    nothing was committed)."""
    git.run("add", "--all")
    files = git.run("diff", "--cached", "--name-only").split()
    if not files:
        return []
    message_file = git.repo.parent / "message.txt"
    message_file.write_text(message, encoding="utf-8")
    git.run("commit", "--quiet", "--no-verify", "--file", str(message_file), identity=who)
    return files


def format_patch(git: Git) -> str:
    """The clone's last commit as `git format-patch` writes it."""
    return git.run("format-patch", "-1", "--stdout", "--no-signature", "HEAD")
