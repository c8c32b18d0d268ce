"""Outside text made inert for GitHub-flavoured Markdown (pull request comments, step summaries).

Every value a Markdown template prints goes through `escape` (the template environment's
`finalize`), so no field can be forgotten. What a value can hold is anything: an arm's name,
an installable, a host name, a check's reason, an engine's output. After `escape` it renders
as the same characters and as nothing else:

- no block: line breaks become spaces, and a character that would open a block at the start of
  a line (`#`, `>`, `-`, `+`, `=`, `1.`) is escaped, so no heading, list, quote or rule;
- no inline markup: every ASCII punctuation character Markdown gives a meaning to is
  backslash-escaped (emphasis, code, links, images, footnotes, tables' pipes, strikethrough,
  math; an underscore inside a word, which cannot be emphasis, is left as it is), and `&`,
  `<`, `>` become entities, so no raw HTML and no `<…>` autolink;
- nothing hidden or reordered: bidirectional controls, zero-width characters and control
  characters are taken out (`qualify.core.plaintext.clean`);
- nothing GitHub links after rendering: a zero-width space after `@` (no mention, no e-mail
  link), inside `://` and after `www` (no bare-URL link), and after `#` before a digit (no issue
  reference).

`code` puts a value in a code span instead (nothing inside one is markup; GitHub links no
mention or URL in it): a fence longer than any run of backticks in the value, line breaks as
spaces, pipes escaped for a table cell.
"""

from __future__ import annotations

import re

from qualify.core.plaintext import clean

__all__ = ["MdSafe", "code", "escape"]

ZWSP = "\u200b"
_BREAKS = re.compile(r"\r\n|[\r\n\u2028\u2029\x0b\x0c\x85]")
# Every character that is markup somewhere in GitHub's Markdown, inline or in a table.
_PUNCTUATION = re.compile(r"([\\`*\[\]!|~$])")
# An underscore between two letters or digits can neither open nor close emphasis (`sm_90`).
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_LINE_START_MARK = re.compile(r"^([-+=#])")
_LINE_START_NUMBER = re.compile(r"^(\d+)([.)])")
_MENTION = re.compile(r"@")
_ISSUE = re.compile(r"#(?=\d)")
_WWW = re.compile(r"(?i)\bwww(?=\.)")
_SCHEME = re.compile(r":/(?=/)")


class MdSafe(str):
    """Markdown already made safe (by `code`), printed as it is."""


def _one_line(text: str) -> str:
    # Line breaks first (a break is a space, not nothing), then what `plaintext.clean` takes out
    # of all outside text: a terminal's escape sequences whole, control characters,
    # bidirectional controls and zero-width characters.
    return clean(_BREAKS.sub(" ", text))


def escape(value: object) -> str:
    """`value` as Markdown text that renders as exactly its characters (see the module)."""
    if isinstance(value, MdSafe):
        return value
    text = _one_line("" if value is None else str(value)).strip()
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _PUNCTUATION.sub(r"\\\1", text)
    text = _UNDERSCORE.sub(r"\\_", text)
    # After the backslashes: the zero-width spaces break what GitHub links in rendered text.
    text = _MENTION.sub("@" + ZWSP, text)
    text = _ISSUE.sub("#" + ZWSP, text)
    text = _WWW.sub("www" + ZWSP, text)
    text = _SCHEME.sub(":/" + ZWSP, text)
    # A value may be printed where a line starts (a list item's text): no block may open there.
    text = _LINE_START_MARK.sub(r"\\\1", text)
    return _LINE_START_NUMBER.sub(r"\1\\\2", text)


def code(value: object) -> MdSafe:
    """`value` as one code span (see the module); empty for an empty value."""
    text = _one_line("" if value is None else str(value)).strip()
    if not text:
        return MdSafe("")
    # In a table, GitHub splits cells at pipes before it reads code spans; `\|` keeps one.
    text = text.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return MdSafe(f"{fence}{pad}{text}{pad}{fence}")
