"""Markdown from the model, the user or a document, rewritten so that the page can render it without the browser
fetching anything from another origin. Pure.

Gradio 6's Chatbot renders Markdown in the browser (marked, then a sanitizer that keeps ``<img>``, ``<video>``,
``<link>`` and style attributes), so a pattern filter in front of it loses to every form that marked reads
differently from the filter: escaped brackets, entities, reference definitions, code spans and fences the filter
misjudges. Here the text is parsed once, by markdown-it with raw HTML off, and written back from the parse tree:
the text itself is escaped wherever marked could read syntax in it, so the only structure the browser sees is the
one written here (paragraphs, headings, lists, quotes, code, tables, emphasis, links and images that stay on the
page's origin). A link or image that points anywhere else becomes text, its address shown as code.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.ui.local_url import encode_local_url, is_local_url

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.tree import SyntaxTreeNode

# Deeper nesting is left to markdown-it, which shows it as text; it also bounds the recursion here.
MAX_NESTING = 20
ASCII_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# A fence's language names a highlighter and nothing else: marked hands ```mermaid to mermaid (whose labels can
# carry HTML), and Gradio looks the name up in a plain object, where "valueOf" finds a function that throws.
_LANGUAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_+#-]{0,29}$")
_NOT_LANGUAGES = frozenset(
    [
        "mermaid",
        *("constructor", "hasownproperty", "isprototypeof", "propertyisenumerable"),
        *("tolocalestring", "tostring", "valueof"),
    ]
)
_BARE_LINK_START = re.compile(r"(?i)(?:https?|ftp)$")
_EMAIL_LOCAL = re.compile(r"[A-Za-z0-9._+-]")
_ENTITY_AHEAD = re.compile(r"#|[A-Za-z0-9]+;")
# The characters escape_text looks at; every other character is written as it is.
_MAYBE_SYNTAX = re.compile(r"[`<|~\\#>+\-=*_\[\]().&:@]")
_ALIGN = {"text-align:left": ":---", "text-align:right": "---:", "text-align:center": ":---:"}


@functools.cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    options = {"html": False, "linkify": False, "typographer": False, "maxNesting": MAX_NESTING}
    return MarkdownIt("commonmark", options).enable(["table", "strikethrough"])


def _tree(text: str) -> SyntaxTreeNode:
    from markdown_it.tree import SyntaxTreeNode

    return SyntaxTreeNode(_parser().parse(text))


def safe_markdown(text: str) -> str:
    """``text`` as Markdown that shows what it says, with no raw HTML and no address off the page's origin."""
    return join_blocks(safe_blocks(text))


@dataclass(frozen=True)
class SafeBlock:
    """One top-level block of a text, rewritten, and the line of that text where it starts."""

    first_line: int
    markdown: str


def safe_blocks(text: str) -> list[SafeBlock]:
    blocks = []
    for node in _tree(text).children:
        lines = _block(node)
        if lines:
            blocks.append(SafeBlock(node.map[0] if node.map else 0, "\n".join(lines)))
    return blocks


def join_blocks(blocks: Sequence[SafeBlock]) -> str:
    return "\n\n".join(block.markdown for block in blocks).strip("\n")


def literal(text: str) -> str:
    """``text`` shown exactly as written, on one line: every ASCII punctuation mark escaped."""
    return ASCII_PUNCTUATION.sub(r"\\\1", " ".join(text.split()))


def _words(nodes: Sequence[SyntaxTreeNode]) -> str:
    parts: list[str] = []
    for node in nodes:
        if node.type in ("text", "code_inline"):
            parts.append(node.content)
        elif node.type == "image":
            parts.append(f"[image: {_words(node.children) or 'untitled'}]")
        elif node.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif node.type in ("fence", "code_block"):
            parts.append(f" {node.content} ")
        elif node.type in ("em", "strong", "s", "link", "inline"):
            parts.append(_words(node.children))
        else:  # a block: its words apart from the next block's
            parts.append(f" {_words(node.children)} ")
    return "".join(parts)


# --- blocks: each becomes a list of lines --------------------------------------------------------------------------


def _blocks(nodes: Sequence[SyntaxTreeNode], tight: bool = False) -> list[str]:
    lines: list[str] = []
    for node in nodes:
        block = _block(node)
        if not block:
            continue
        if lines and not tight:
            lines.append("")
        lines.extend(block)
    return lines


def _block(node: SyntaxTreeNode) -> list[str]:
    if node.type == "paragraph":
        return _inline(node).split("\n")
    if node.type == "heading":
        level = int(node.tag[1:]) if node.tag[1:].isdigit() else 1
        text = _inline(node, heading=True).replace("\\\n", " ").replace("\n", " ")
        return [f"{'#' * level} {text}"]
    if node.type == "blockquote":
        return [f"> {line}" if line else ">" for line in _blocks(node.children)]
    if node.type in ("bullet_list", "ordered_list"):
        return _list(node)
    if node.type in ("fence", "code_block"):
        return _fence(node.content, node.info if node.type == "fence" else "")
    if node.type == "hr":
        return ["***"]  # never '---', which right under a line of text would make that line a heading
    if node.type == "table":
        return _table(node)
    # Nothing else comes out of this parser (raw HTML is off); anything new is shown as text.
    content = node.content.strip()
    return [literal(content)] if content else []


def _list(node: SyntaxTreeNode) -> list[str]:
    # The marker as written: two lists next to each other stay two lists only while their markers differ.
    if node.type == "ordered_list":
        start = int(str(node.attrs.get("start", 1)))
        delimiter = node.markup if node.markup in (".", ")") else "."
        markers = [f"{start + index}{delimiter}" for index in range(len(node.children))]
    else:
        markers = [node.markup if node.markup in ("-", "*", "+") else "-"] * len(node.children)
    items = node.children
    tight = all(child.hidden for item in items for child in item.children if child.type == "paragraph")
    lines: list[str] = []
    for marker, item in zip(markers, items, strict=True):
        body = _blocks(item.children, tight)
        if lines and not tight:
            lines.append("")
        if not body:
            lines.append(marker)
            continue
        indent = " " * (len(marker) + 1)
        lines.append(f"{marker} {body[0]}")
        lines.extend(f"{indent}{line}" if line else "" for line in body[1:])
    return lines


def _fence(content: str, info: str) -> list[str]:
    longest = max((len(run) for run in re.findall(r"`+", content)), default=0)
    fence = "`" * max(3, longest + 1)
    words = info.split()
    language = words[0] if words and _LANGUAGE.match(words[0]) and words[0].lower() not in _NOT_LANGUAGES else ""
    return [f"{fence}{language}", *content.rstrip("\n").split("\n"), fence] if content.strip("\n") else [fence, fence]


def _table(node: SyntaxTreeNode) -> list[str]:
    rows = [row for section in node.children for row in section.children]
    if not rows:
        return []
    header = rows[0]
    aligns = [_ALIGN.get(str(cell.attrs.get("style", "")), "---") for cell in header.children]
    lines = [_row(header), f"| {' | '.join(aligns)} |"]
    lines.extend(_row(row) for row in rows[1:])
    return lines


def _row(row: SyntaxTreeNode) -> str:
    cells = [_inline(cell, table=True).replace("\\\n", " ").replace("\n", " ") for cell in row.children]
    return f"| {' | '.join(cells)} |"


# --- inline content ------------------------------------------------------------------------------------------------


def _inline(block: SyntaxTreeNode, heading: bool = False, table: bool = False) -> str:
    """The inline content of a paragraph, heading or table cell; softbreaks stay line breaks."""
    writer = _InlineWriter(heading=heading, table=table)
    for child in block.children:  # the one "inline" node
        writer.nodes(child.children)
    return "".join(writer.parts)


class _InlineWriter:
    def __init__(self, heading: bool, table: bool) -> None:
        self.parts: list[str] = []
        self.last = "" if not (heading or table) else " "  # "" and "\n": at the start of a line
        self.heading = heading
        self.table = table
        self.brackets = 0  # inside a link's text or an image's description

    def emit(self, markup: str) -> None:
        if markup:
            self.parts.append(markup)
            self.last = markup[-1]

    def text(self, text: str) -> None:
        self.emit(escape_text(text, self.last, brackets=self.brackets > 0, heading=self.heading))

    def code(self, content: str) -> None:
        if self.table:
            content = content.replace("|", "\\|")  # cells are split at pipes before code spans are read
        self.emit(code_span(content))

    def nodes(self, nodes: Sequence[SyntaxTreeNode]) -> None:
        for node in nodes:
            self.node(node)

    def node(self, node: SyntaxTreeNode) -> None:
        kind = node.type
        if kind == "text":
            self.text(node.content)
        elif kind == "softbreak":
            self.emit("\n")
        elif kind == "hardbreak":
            self.emit("\\\n")
        elif kind == "code_inline":
            self.code(node.content)
        elif kind in ("em", "strong", "s"):
            mark = {"em": "*", "strong": "**", "s": "~~"}[kind]
            self.emit(mark)
            self.nodes(node.children)
            self.emit(mark)
        elif kind == "link":
            self.link(node)
        elif kind == "image":
            self.image(node)
        else:
            self.text(node.content)

    def link(self, node: SyntaxTreeNode) -> None:
        href = str(node.attrs.get("href", ""))
        if is_local_url(href):
            self.emit("[")
            self.brackets += 1
            self.nodes(node.children)
            self.brackets -= 1
            self.emit(f"](<{encode_local_url(href)}>)")
            return
        label = "".join(child.content for child in node.children)
        if node.markup == "autolink" or label == href:
            self.code(label or href)
            return
        self.nodes(node.children)
        self.emit(" (")
        self.code(href)
        self.emit(")")

    def image(self, node: SyntaxTreeNode) -> None:
        src = str(node.attrs.get("src", ""))
        if is_local_url(src):
            self.emit("![")
            self.brackets += 1
            self.text(" ".join(_words(node.children).split()))
            self.brackets -= 1
            self.emit(f"](<{encode_local_url(src)}>)")
            return
        self.text(f"[image: {' '.join(_words(node.children).split()) or 'untitled'}]")
        if src:
            self.emit(" (")
            self.code(src)
            self.emit(")")


def code_span(content: str) -> str:
    """``content`` as an inline code span, whatever backticks it holds."""
    content = content.replace("\n", " ")
    if not content:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", content)), default=0)
    ticks = "`" * (longest + 1)
    padded = content.startswith(("`", " ")) or content.endswith(("`", " "))
    return f"{ticks} {content} {ticks}" if padded and content.strip() else f"{ticks}{content}{ticks}"


def escape_text(text: str, before: str, brackets: bool = False, heading: bool = False) -> str:
    """Text for marked to show as it is. ``before`` is the character written just before it ("" or a newline at
    the start of a line).

    Escaped always: what opens code, HTML, autolinks, tables, strikethrough, or an escape (`` ` < | ~ \\ ``).
    Escaped where it would mean something: ``(`` right after ``]`` (which would make a link or an image of the
    brackets), ``[`` at the start of a line (a reference definition), the marks that start a block at the start
    of a line (``# > - + = * _``, ``1.``), ``*`` and ``_`` next to a word (emphasis), ``&`` before an entity, and
    the ``:`` / ``.`` / ``@`` that would make marked turn ``http://…``, ``www.…`` or an e-mail address into a link.
    """
    at_line_start = before in ("", "\n")
    digits = len(text) - len(text.lstrip("0123456789")) if at_line_start else 0
    out: list[str] = []
    done = 0
    for match in _MAYBE_SYNTAX.finditer(text):
        index = match.start()
        previous = text[index - 1] if index else before
        following = text[index + 1 : index + 2]
        opens_line = at_line_start and index == 0
        after_number = at_line_start and 0 < index == digits  # "1." or "1)" opening a line would start a list
        if _needs_escape(text, index, previous, following, opens_line, after_number, brackets, heading):
            out += (text[done:index], "\\")
            done = index
    out.append(text[done:])
    return "".join(out)


def _needs_escape(
    text: str,
    index: int,
    previous: str,
    following: str,
    opens_line: bool,
    after_number: bool,
    brackets: bool,
    heading: bool,
) -> bool:
    char = text[index]
    if char in "`<|~\\":
        return True
    if opens_line and char in "#>+-=*_[":
        return True
    if char in ".)":
        return after_number or (char == "." and text[max(0, index - 3) : index].lower() == "www")
    if char == "(":
        return previous == "]"
    if char in "[]":
        return brackets
    if char == "#":
        return heading  # a trailing '#' would be read as the heading's closing mark
    if char == "*":
        return not (previous.isspace() and following.isspace())
    if char == "_":
        return not (previous.isalnum() and following.isalnum())
    if char == "&":
        return _ENTITY_AHEAD.match(text, index + 1) is not None
    if char == ":":
        return text.startswith("//", index + 1) and _BARE_LINK_START.search(text, 0, index) is not None
    if char == "@":
        return _EMAIL_LOCAL.match(previous) is not None
    return False
