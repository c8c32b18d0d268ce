"""The body of `qualify comment`: the summary qualify wrote (any other file refused), behind the
hidden marker line that names the comment as one key's (`qualify.report.prcomment` posts it),
cut to GitHub's limit at a line boundary."""

from __future__ import annotations

from pathlib import Path

from qualify.core.capped import FileTooLarge, read_capped
from qualify.core.errors import UsageError
from qualify.core.plaintext import clean

#: GitHub refuses a comment body longer than this.
MAX_BODY = 65_536
MAX_SUMMARY_BYTES = 16 << 20
#: How every summary.md qualify writes begins (a run's, a run set's, a fleet's: the templates
#: in reports/*.md.j2): what tells it from the other files of a report folder.
SUMMARY_HEADER = "## Toolchain qualification"
_GIVE_THE_SUMMARY = (
    "give the summary.md that `qualify merge --out DIR` (or `qualify run`) wrote: DIR/summary.md, "
    "not fleet.json, report.json or report.html"
)


def marker(key: str) -> str:
    """The hidden line that names a comment as this key's (GitHub does not show HTML comments)."""
    if not key.strip() or "--" in key or any(c in key for c in "<>") or clean(key) != key or "\n" in key:
        raise UsageError(
            f"--key {key!r}: a key is shown inside an HTML comment, so it may not be empty nor hold "
            "'--', '<', '>' or control characters",
            "name it with letters, digits, spaces and . _ / (the workflow's name, for example)",
        )
    return f"<!-- qualify: {key.strip()} -->"


def _length(text: str) -> int:
    # Counted in UTF-16 code units, the most any count of characters gives (an emoji is two):
    # a body cut to this count is within GitHub's limit however it counts.
    return len(text.encode("utf-16-le")) // 2


def comment_body(text: str, key: str) -> tuple[str, bool]:
    """The comment: the marker line, then `text`; cut at a line boundary, with a line saying so,
    when it would pass GitHub's limit. Returns the body and whether it was cut."""
    head = marker(key) + "\n"
    if _length(head + text) <= MAX_BODY:
        return head + text, False
    note = (
        f"\n*The summary is cut here: it is {_length(text):,} characters, over GitHub's limit of "
        f"{MAX_BODY:,} for a comment. The whole summary is the fleet report's summary.md.*\n"
    )
    fence = "```\n"
    room = MAX_BODY - _length(head) - _length(note) - _length(fence)
    kept: list[str] = []
    used = 0
    for line in text.splitlines(keepends=True):
        if used + _length(line) > room:
            break
        kept.append(line)
        used += _length(line)
    if not kept:  # one line longer than the limit: cut inside it, nothing else would fit
        line = text.splitlines()[0]
        while _length(line) > room:
            line = line[: max(len(line) - (_length(line) - room), 0)]
        kept = [line]
    cut = "".join(kept).rstrip("\n") + "\n"
    # A code block left open would swallow the note: it is closed first.
    if sum(1 for line in cut.splitlines() if line.lstrip().startswith("```")) % 2:
        cut += fence
    return head + cut + note, True


def read_summary(path: Path) -> str:
    """The summary.md qualify wrote at `path`; any other file is refused before anything is
    posted: a comment is public and edited in place, and fleet.json or report.html beside it
    would be posted as they are (a wall of JSON, or raw HTML)."""
    try:
        text = read_capped(path, MAX_SUMMARY_BYTES, "the summary").decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file", _GIVE_THE_SUMMARY) from None
    except (FileTooLarge, OSError, ValueError) as exc:  # UnicodeDecodeError included
        raise UsageError(f"{path}: cannot read the summary: {exc}", _GIVE_THE_SUMMARY) from None
    first = text.lstrip("\ufeff").split("\n", 1)[0]
    if not first.startswith(SUMMARY_HEADER):
        raise UsageError(
            f"{path}: not a summary qualify wrote: its first line is not {SUMMARY_HEADER!r}",
            _GIVE_THE_SUMMARY,
        )
    return text
