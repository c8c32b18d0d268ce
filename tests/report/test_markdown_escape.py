"""Outside text in summary.md renders as its own characters and as no Markdown at all.

The parser is markdown-it-py (CommonMark with GitHub's tables and strikethrough), the reader a
pull request comment would have. What GitHub links after rendering (mentions, bare URLs, issue
references) is not CommonMark: those are checked on the rendered text, where GitHub finds them.
Nothing stands in for anything: qualify's own escaping, a real parser.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from qualify.core import markdown
from qualify.core.plaintext import clean
from qualify.report.render import SummaryLinks, md_cell, render_summary

HOSTILE = [
    "## Toolchain qualification: **QUALIFIED**",
    "@someone please merge",
    "![x](http://e/x.png)",
    "[link](javascript:x)",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "`code` and ``more``",
    "a | b | c",
    "line one\n## line two\n- item\n> quote",
    "www.example.com and https://example.com/x and mailto:a@b.example",
    "fixes #12 and org/repo#3",
    "[^1] footnote, ~~struck~~, $x^2$ math, [ ] task",
    "1. not a list",
    "- not an item",
    "    not code",
    "&lt;b&gt; stays &amp; as written",
    "<!-- a comment -->",
    "[ref]: http://e/",
    "***",
    "===",
]


def parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def flat(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    for token in tokens:
        out.append(token)
        out += flat(token.children or [])
    return out


def plain(value: str) -> str:
    """What escaping promises to keep: the characters, on one line, trimmed, less those no
    report shows (`plaintext.clean`: control characters and sequences, bidirectional controls,
    zero-width characters)."""
    text = re.sub(r"\r\n|[\r\n\u2028\u2029\x0b\x0c\x85]", " ", value)
    return clean(text).strip()


def rendered_text(source: str) -> tuple[list[str], str]:
    """(the token types, the text) of `source` parsed as a whole document."""
    tokens = flat(parser().parse(source))
    text = "".join(t.content for t in tokens if t.type in ("text", "text_special", "code_inline"))
    return [t.type for t in tokens], text


ALLOWED = {"paragraph_open", "paragraph_close", "inline", "text", "text_special"}


def test_each_hostile_value_is_only_text_where_a_line_starts_and_mid_line() -> None:
    for value in HOSTILE:
        for source in (md_cell(value), "x " + md_cell(value), "- " + md_cell(value)):
            types, text = rendered_text(source)
            extra = {"bullet_list_open", "bullet_list_close", "list_item_open", "list_item_close"}
            assert set(types) <= ALLOWED | (extra if source.startswith("- ") else set()), (value, types)
            assert text.replace(markdown.ZWSP, "").endswith(plain(value)), (value, text)
            assert not re.search(r"@[A-Za-z0-9]", text), value  # no mention, no e-mail link
            assert not re.search(r"(?i)https?://|www\.|#\d", text), value  # nothing GitHub links


def test_a_table_cell_keeps_its_pipes_and_the_table_its_shape() -> None:
    row = " | ".join(md_cell(v) for v in HOSTILE[:8])
    source = "| " + " | ".join(f"h{i}" for i in range(8)) + " |\n|" + "---|" * 8 + "\n| " + row + " |\n"
    tokens = flat(parser().parse(source))
    cells = [t for t in tokens if t.type == "td_open"]
    assert len(cells) == 8
    assert not {t.type for t in tokens} & {"link_open", "image", "html_inline", "html_block", "strong_open"}


def test_code_spans_hold_backticks_and_pipes() -> None:
    for value in ("a`b", "``x``", "`lead", "trail`", "p|q"):
        tokens = flat(parser().parse("| h |\n|---|\n| " + markdown.code(value) + " |\n"))
        (span,) = [t for t in tokens if t.type == "code_inline"]
        assert span.content.strip() == value.strip(), value


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_any_text_renders_as_exactly_its_characters(value: str) -> None:
    types, text = rendered_text(md_cell(value))
    assert set(types) <= ALLOWED, (value, types)
    assert text.replace(markdown.ZWSP, "") == plain(value).replace(markdown.ZWSP, "")


H = HOSTILE[0] + " " + " ".join(HOSTILE[1:8]) + "\n# x"


def test_every_field_of_the_set_and_fleet_summaries_is_escaped(tmp_path: Path) -> None:
    """The set's and the fleet's templates, every field hostile (merged runs' hosts, labels,
    reasons, bench tables): the only headings, bold text and HTML are the templates' own."""
    column = {"key": "k", "title": H, "role": H, "arm": H, "verdict": H, "behaved": True, "note": H}
    cell = {"outcome": H, "expected": H, "undecided": True}
    stage = {"name": H, "configured": True, "outcome": H, "ungated": True, "undecided": True, "why": H}
    common = {"verdict": "QUALIFIED", "verdict_note": H, "verdict_reason": H, "run_id": H, "not_proven": [H]}
    set_model = {
        **common,
        "candidates": [column],
        "pinned": {"arm": H, "installable": H},
        "source": {"rev": H, "dirty": True},
        "host": {"label": H, "hostname": H, "kernel": H},
        "gpus": [],
        "profile": H,
        "controls_line": H,
        "columns": [column],
        "stages": [H],
        "cells": {H: {"k": cell}},
        "members": [{"stages": [stage]}],
        "unprotected": [H],
    }
    fleet_model = {
        **common,
        "hosts": [{"key": H, "verdict": H, "gpus": [H], "kernel": H, "controls": H}],
        "candidates": [H],
        "identity": {"source revision": H, "plan": H, "profile": H},
        "mixed": [H],
        "columns": [column],
        "stages": [H],
        "cells": {H: {"k": cell}},
        "differences": [H],
        "bench": {H: {"columns": [H, H], "rows": [[H, H]]}},
    }
    for template, model in (("set.md.j2", set_model), ("fleet.md.j2", fleet_model)):
        source = render_summary(template, model, tmp_path, SummaryLinks())  # type: ignore[arg-type]
        tokens = flat(parser().parse(source))
        headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
        assert [h.split(" ")[0] for h in headings][0] == "Toolchain", (template, headings)
        assert all(not h.startswith("Toolchain qualification: **Q") or h.count("**") == 2 for h in headings)
        assert not {t.type for t in tokens} & {"link_open", "image", "html_inline", "code_block", "fence"}
        html = [t.content for t in tokens if t.type == "html_block"]
        assert all(re.fullmatch(r"(</?details>|<summary>[^<>]*</summary>|\s)*", b) for b in html), html
        # Bold only where the template puts it: around its own words or around a whole value.
        whole = plain(H)
        for start in [i for i, t in enumerate(tokens) if t.type == "strong_open"]:
            end = next(i for i in range(start, len(tokens)) if tokens[i].type == "strong_close")
            shown = "".join(t.content for t in tokens[start:end]).replace(markdown.ZWSP, "")
            assert shown in ("QUALIFIED", "verdict", whole, "Merged although they differ:"), shown
        text = " ".join(t.content for t in tokens if t.type in ("text", "text_special"))
        assert not re.search(r"@[A-Za-z0-9]|https?://|www\.|#\d", text), template
        assert "<script>alert(1)</script>" in text
