"""Check the links of the project's Markdown pages: ``python scripts/check_links.py [FILE.md ...]``.

Every relative link (``[text](docs/options.md)``, an image, a reference-style link) must point at a file or folder
of the repository, and every ``#anchor`` (``#per-dataset-settings``, ``docs/datasets.md#task-ids``) at a heading
of the page it names, by GitHub's anchor rules (:func:`slug`). External links (``http://``, ``https://``,
``mailto:``) are not fetched (CI runs offline): they are counted, by host. Links inside code blocks and code
spans are not links, which is why the pages are parsed with markdown-it-py (CommonMark, with tables) rather than
matched by regular expressions.

Without arguments it checks the project's pages (:data:`DEFAULT_PAGES`). Exit status 0 when every link resolves,
1 otherwise, each broken link on a line of its own as ``FILE:LINE: ...``.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PAGES = ("README.md", "docs/**/*.md", "examples/**/README.md", "benchmarks/README.md")
"""Globs (relative to the repository root) of the pages checked when none is named."""
EXTERNAL_SCHEMES = ("http", "https", "mailto")


@dataclass
class Report:
    """What :func:`check` found: ``broken`` lines (``FILE:LINE: why``), the number of relative links and anchors
    checked, and the external links (not fetched) by host."""

    broken: list[str] = field(default_factory=list)
    checked: int = 0
    external: Counter[str] = field(default_factory=Counter)

    def summary(self, pages: int) -> str:
        hosts = ", ".join(f"{host} {n}" for host, n in sorted(self.external.items()))
        return (
            f"links: {self.checked} relative links and anchors in {pages} pages checked, {len(self.broken)} broken; "
            f"{sum(self.external.values())} external links not fetched ({hosts or 'none'})"
        )


def slug(text: str) -> str:
    """The anchor GitHub gives a heading whose rendered text is ``text``: lower case, every character that is not a
    letter, digit, ``_``, ``-`` or a space removed, each space a ``-`` (``"The `gym_session` fixture"`` ->
    ``the-gym_session-fixture``; ``"Keeping Gym warm, and resuming a run"`` ->
    ``keeping-gym-warm-and-resuming-a-run``). A page's second heading of one slug gets ``-1``, the third ``-2``
    (:func:`anchors`)."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def _plain(inline: Token) -> str:
    """The text a heading's inline token renders to (code spans keep their content, markup goes)."""
    parts = []
    for child in inline.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts)


def anchors(tokens: Sequence[Token]) -> set[str]:
    """Every anchor of a parsed page: its headings' slugs (numbered when repeated, as GitHub numbers them) and the
    ``id``/``name`` of HTML elements written in it."""
    seen: Counter[str] = Counter()
    found: set[str] = set()
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            base = slug(_plain(tokens[index + 1]))
            found.add(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
    for token in _walk(tokens):
        if token.type in ("html_block", "html_inline"):
            found.update(re.findall(r"""\b(?:id|name)\s*=\s*["']([^"']+)["']""", token.content))
    return found


def links(tokens: Sequence[Token], lines: Sequence[str]) -> Iterable[tuple[int, str]]:
    """``(line, target)`` of every link and image of a parsed page (1-based line: the line of its block that
    holds the target, else the block's first)."""
    for token in tokens:
        if token.type != "inline":
            continue
        start, end = token.map if token.map else (0, len(lines))
        for child in _walk(token.children or []):
            attr = "href" if child.type == "link_open" else "src" if child.type == "image" else None
            if attr is None:
                continue
            target = str(child.attrGet(attr) or "")
            raw = unquote(target)
            line = next((n for n in range(start, end) if raw in unquote(lines[n]) or target in lines[n]), start)
            yield line + 1, target


def _walk(tokens: Sequence[Token]) -> Iterable[Token]:
    for token in tokens:
        yield token
        yield from _walk(token.children or [])


class _Pages:
    """Parsed pages, each once: their tokens and anchors."""

    def __init__(self) -> None:
        self._tokens: dict[Path, list[Token]] = {}

    def tokens(self, path: Path) -> list[Token]:
        if path not in self._tokens:
            self._tokens[path] = _parser().parse(path.read_text(encoding="utf-8"))
        return self._tokens[path]

    def anchors(self, path: Path) -> set[str]:
        return anchors(self.tokens(path))


def check(pages: Sequence[Path], root: Path = ROOT) -> Report:
    """Check every link of ``pages`` (Markdown files inside ``root``); see the module docstring."""
    report = Report()
    parsed = _Pages()
    root = root.resolve()
    for page in pages:
        page = page.resolve()
        inside = page.is_relative_to(root)
        name, base = (page.relative_to(root), root) if inside else (page, page.parent)
        lines = page.read_text(encoding="utf-8").splitlines()
        for line, target in links(parsed.tokens(page), lines):
            parts = urlsplit(target)
            if parts.scheme in EXTERNAL_SCHEMES:
                report.external[parts.netloc or parts.scheme] += 1
                continue
            report.checked += 1
            where = f"{name}:{line}: {target}"
            if parts.scheme or parts.netloc:
                report.broken.append(f"{where}: not a relative link nor an http(s) one")
                continue
            path, anchor = unquote(parts.path), unquote(parts.fragment)
            if path:
                dest = (base / path.lstrip("/")) if path.startswith("/") else (page.parent / path)
                dest = dest.resolve()
                if not dest.is_relative_to(base):
                    report.broken.append(f"{where}: points outside the repository")
                    continue
                if not dest.exists():
                    report.broken.append(f"{where}: no such file or folder")
                    continue
            else:
                dest = page
            if anchor and dest.suffix == ".md" and dest.is_file() and anchor not in parsed.anchors(dest):
                shown = dest.relative_to(base) if dest.is_relative_to(base) else dest
                report.broken.append(f"{where}: no heading with the anchor #{anchor} in {shown}")
    return report


def default_pages(root: Path = ROOT) -> list[Path]:
    """The pages :data:`DEFAULT_PAGES` names, each once, in a stable order."""
    found = {path for pattern in DEFAULT_PAGES for path in root.glob(pattern) if path.is_file()}
    return sorted(found)


def main(argv: list[str]) -> int:
    pages = [Path(arg) for arg in argv] if argv else default_pages()
    report = check(pages)
    for line in report.broken:
        print(line, file=sys.stderr)
    print(report.summary(len(pages)))
    return 1 if report.broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
