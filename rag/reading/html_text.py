"""The text of an HTML page as sections, one per heading, named by their heading path.

What a reader sees, not what the markup holds: inline elements join without added spaces (a Sphinx signature is
dozens of ``<span>``s and must read "json.dumps(obj, *, skipkeys=False)", not "json. dumps ( obj , * ,"), block
elements end lines, ``<pre>`` keeps its layout, and table rows read as "header: value; header: value" so that a
cell is found with its column's name. Navigation, scripts and permalink anchors ("¶") are left out, and the page's
main content (``<main>``, ``role="main"`` or ``<article>``) is read when it has one. Markdown is read the same way
once rendered (:mod:`rag.reading.markdown_text`).

The tree is walked with an explicit stack, never recursion, so deeply nested markup cannot exhaust Python's stack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rag.reading.clean_text import clean_line, clean_text
from rag.reading.sections import Section, TextBudget, heading_text

PATH_SEPARATOR = " › "
# Elements whose content is not part of the document's text.
_DROPPED = frozenset(
    {"script", "style", "noscript", "template", "head", "title", "svg", "canvas", "iframe", "object", "embed"}
)
_DROPPED |= {"nav", "button", "select", "datalist", "dialog"}
_NAVIGATION_ROLES = frozenset({"navigation", "search", "banner", "contentinfo", "complementary"})
# Elements that end a paragraph (a blank line after them) or a line.
_PARAGRAPHS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "aside",
        "header",
        "footer",
        "blockquote",
        "pre",
        "ul",
        "ol",
        "dl",
        "figure",
        "details",
        "fieldset",
        "form",
        "address",
        "table",
        "hr",
    }
)
_LINES = frozenset({"li", "dt", "dd", "tr", "figcaption", "summary", "caption", "legend", "br", "option"})
_BLOCKS = _PARAGRAPHS | _LINES | {"td", "th", "h1", "h2", "h3", "h4", "h5", "h6"}
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_PERMALINK_MARKS = frozenset({"¶", "§", "#", "🔗", "link"})
# Share of the page's text the main element must hold to be read alone (a page that marks only a small box as
# main is read whole).
MAIN_SHARE = 0.2
_SPACES = re.compile(r"\s+")


def html_sections(markup: str, budget: TextBudget) -> list[Section]:
    """The sections of an HTML page: text before the first heading is named by the page's title."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(markup, "html.parser")
    title = heading_text(soup.title.get_text(" ") if soup.title else "")
    if title is None:
        first = soup.find(list(_HEADINGS))
        title = heading_text(_inline_text(first) if first is not None else "")
    root = _content_root(soup)
    _drop_noise(root)
    walker = _Walker(budget, title)
    walker.walk(root)
    return walker.finish()


def _content_root(soup: Any) -> Any:
    body = soup.body or soup
    main = soup.find("main") or soup.find(attrs={"role": "main"}) or soup.find("article")
    if main is None:
        return body
    if len(main.get_text()) < MAIN_SHARE * len(body.get_text()):
        return body
    return main


def _drop_noise(root: Any) -> None:
    """Remove navigation landmarks and permalink anchors (the "¶" after each heading) from the tree."""
    doomed = [tag for tag in root.find_all(attrs={"role": True}) if str(tag.get("role")).lower() in _NAVIGATION_ROLES]
    for anchor in root.find_all("a"):
        classes = anchor.get("class") or []
        text = anchor.get_text().strip()
        href = str(anchor.get("href") or "")
        if "headerlink" in classes or (href.startswith("#") and text.lower() in _PERMALINK_MARKS):
            doomed.append(anchor)
    for tag in doomed:
        if tag.parent is not None:  # not already removed with an ancestor
            tag.decompose()


def _inline_text(tag: Any) -> str:
    """The text of an element on one line: its strings as written, a space where a block element begins."""
    from bs4.element import NavigableString, Tag

    pieces: list[str] = []
    for node in tag.descendants:
        if isinstance(node, Tag):
            if node.name in _BLOCKS:
                pieces.append(" ")
        elif isinstance(node, NavigableString) and _is_text(node):
            pieces.append(str(node))
    return clean_line("".join(pieces))


def _is_text(node: Any) -> bool:
    """Whether a string is text a reader sees (not a comment, a doctype or a processing instruction)."""
    from bs4.element import Comment, Declaration, Doctype, ProcessingInstruction

    return not isinstance(node, Comment | Declaration | Doctype | ProcessingInstruction)


def table_lines(table: Any) -> list[str]:
    """One line per row: "header: value; …" when the first row is a header row, else the cells joined by "; "."""
    rows = [row for row in table.find_all("tr") if row.find_parent("table") is table]
    caption = table.find("caption")
    lines = [_inline_text(caption)] if caption is not None else []
    header: list[str] | None = None
    for number, row in enumerate(rows):
        cells = row.find_all(["td", "th"], recursive=False)
        texts = [_inline_text(cell) for cell in cells]
        if number == 0 and cells and all(cell.name == "th" for cell in cells):
            header = texts
            continue
        if header is not None and len(texts) <= len(header):
            pairs = [f"{name}: {value}" if name else value for name, value in zip(header, texts, strict=False) if value]
            line = "; ".join(pairs)
        else:
            line = "; ".join(text for text in texts if text)
        if line:
            lines.append(line)
    if header is not None and not lines:
        lines.append("; ".join(text for text in header if text))
    return [line for line in lines if line]


@dataclass
class _Walker:
    budget: TextBudget
    title: str | None
    sections: list[Section] = field(default_factory=list)
    path: list[tuple[int, str]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    line: list[str] = field(default_factory=list)
    has_body: bool = False
    in_pre: int = 0

    def walk(self, root: Any) -> None:
        from bs4.element import NavigableString, Tag

        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:
            node, closing = stack.pop()
            if closing:
                self._close(node.name)
            elif isinstance(node, Tag):
                name = node.name
                if name in _DROPPED:
                    continue
                if name in _HEADINGS:
                    self._heading(_HEADINGS[name], _inline_text(node))
                elif name == "table":
                    self._paragraph_break()
                    for line in table_lines(node):
                        self._add_line(line)
                    self._paragraph_break()
                elif name == "br":
                    self._end_line()
                else:
                    if name in _BLOCKS:
                        self._end_line()
                    if name == "pre":
                        self.in_pre += 1
                    stack.append((node, True))
                    stack.extend((child, False) for child in reversed(node.contents))
            elif isinstance(node, NavigableString) and _is_text(node):
                self._text(str(node))

    def finish(self) -> list[Section]:
        self._flush()
        return self.sections

    def _close(self, name: str) -> None:
        if name == "pre":
            self._end_line()  # while still inside: the line keeps its indentation
            self.in_pre -= 1
        if name in _PARAGRAPHS:
            self._paragraph_break()
        elif name in _BLOCKS:
            self._end_line()

    def _text(self, text: str) -> None:
        if not self.in_pre:
            self.line.append(_SPACES.sub(" ", text))
            return
        first, *rest = text.split("\n")
        self.line.append(first)
        for part in rest:
            self._end_line()
            self.line.append(part)

    def _end_line(self) -> None:
        text = "".join(self.line)
        self.line = []
        text = text.rstrip() if self.in_pre else _SPACES.sub(" ", text).strip()
        if text.strip():
            self._add_line(text)

    def _add_line(self, text: str) -> None:
        self.lines.append(text)
        self.has_body = True

    def _paragraph_break(self) -> None:
        self._end_line()
        if self.lines and self.lines[-1]:
            self.lines.append("")

    def _heading(self, level: int, text: str) -> None:
        self._flush()
        if not text:
            return
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, heading_text(text) or text))
        self.lines = [text]

    def _flush(self) -> None:
        self._end_line()
        text = clean_text("\n".join(self.lines))
        if self.has_body and text:
            name = PATH_SEPARATOR.join(name for _, name in self.path) or self.title
            self.sections.append(Section(self.budget.take(text), section=name))
        self.lines = []
        self.has_body = False
