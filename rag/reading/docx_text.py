"""The text of a Word (.docx) file as sections, one per heading, read as a stream with bounded memory.

Same parts and the same text as docx2txt (headers, the body, footers; tabs and line breaks kept, a blank line
between paragraphs), but docx2txt reads each part whole into memory and builds an ElementTree of it: 10 million
nested paragraphs in a 160 KB file took 3 minutes and 3 GB, and a DTD's entities, which expat expands up to 100
times the input, turned 400 KB into gigabytes of text. Here the archive is checked first (:mod:`rag.reading.archive`),
then each part is fed to expat in small pieces: no tree is kept, nesting is bounded, a DTD (which Word never writes)
is refused, and the text is counted against the limit as it is found.

Paragraphs in a heading style (found in ``word/styles.xml``) start a new section named by the heading path
("Sorting HOW TO › Key Functions"), instead of running into the text.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from xml.parsers import expat

from rag.reading.archive import PartReader, checked_parts, entry_count_problem
from rag.reading.limits import ReadLimits
from rag.reading.sections import Section, Skipped, TextBudget, heading_text

_WORD = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_TEXT, _TAB, _BREAK, _CARRIAGE, _PARAGRAPH = (f"{_WORD} {name}" for name in ("t", "tab", "br", "cr", "p"))
_STYLE, _STYLE_REF, _NAME, _BASED_ON, _OUTLINE = (
    f"{_WORD} {name}" for name in ("style", "pStyle", "name", "basedOn", "outlineLvl")
)
_VAL, _TYPE, _STYLE_ID = (f"{_WORD} {name}" for name in ("val", "type", "styleId"))
_HEADER = re.compile(r"word/header[0-9]*\.xml")
_FOOTER = re.compile(r"word/footer[0-9]*\.xml")
_BODY = "word/document.xml"
_STYLES = "word/styles.xml"
_HEADING_NAME = re.compile(r"heading ([1-9])")
# Word's outline levels run 0-8 for headings; 9 is body text.
_BODY_TEXT_OUTLINE = 9
PATH_SEPARATOR = " › "


def is_text_part(name: str) -> bool:
    return name in (_BODY, _STYLES) or bool(_HEADER.fullmatch(name) or _FOOTER.fullmatch(name))


def _order(info: zipfile.ZipInfo) -> int:
    name = info.filename
    return -1 if name == _STYLES else 0 if _HEADER.fullmatch(name) else 1 if name == _BODY else 2


def docx_sections(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    """One section per heading of the body (named by its heading path, the heading its first line), and the
    headers and footers as sections of their own."""
    problem = entry_count_problem(path, limits)
    if problem:
        raise Skipped(problem)
    try:
        with zipfile.ZipFile(path) as archive:
            parts = sorted(checked_parts(archive, is_text_part, limits), key=_order)
            if not any(info.filename == _BODY for info in parts):
                raise Skipped(f"it is not a Word document (it has no {_BODY}); it may be damaged")
            reader = PartReader(archive, limits)
            styles = _StyleTable()
            sections: list[Section] = []
            for info in parts:
                if info.filename == _STYLES:
                    _feed(reader, info, limits, styles)
                else:
                    text = _PartText(info.filename, budget, styles.heading_levels())
                    _feed(reader, info, limits, text)
                    sections.extend(text.finish())
    except zipfile.BadZipFile as exc:
        raise Skipped(f"the Word file cannot be read ({exc}); it may be damaged") from exc
    return sections


class _Handler:
    """Receives expat's callbacks for one XML part."""

    def start(self, name: str, attributes: dict[str, str]) -> None: ...

    def end(self, name: str) -> None: ...

    def characters(self, data: str) -> None: ...


def _feed(reader: PartReader, info: zipfile.ZipInfo, limits: ReadLimits, handler: _Handler) -> None:
    """Parse one part in small pieces, refusing DTDs and nesting deeper than the limit; nothing else is kept."""
    name = info.filename
    depth = 0

    def refuse_dtd(*_: object) -> None:
        raise Skipped(
            f"its part {name} declares a DTD (XML entities), which Word never writes and which can expand to "
            "gigabytes; it was not read"
        )

    def start(element: str, attributes: dict[str, str]) -> None:
        nonlocal depth
        depth += 1
        if depth > limits.max_xml_depth:
            raise Skipped(
                f"its part {name} nests elements more than {limits.max_xml_depth:,} levels deep, which no real "
                "document does; it was not read"
            )
        handler.start(element, attributes)

    def end(element: str) -> None:
        nonlocal depth
        depth -= 1
        handler.end(element)

    parser = expat.ParserCreate(namespace_separator=" ")
    parser.buffer_text = True
    parser.StartDoctypeDeclHandler = refuse_dtd
    parser.EntityDeclHandler = refuse_dtd
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = handler.characters
    try:
        for chunk in reader.chunks(info):
            parser.Parse(chunk, False)
        parser.Parse(b"", True)
    except expat.ExpatError as exc:
        if exc.code == expat.errors.codes[expat.errors.XML_ERROR_NO_MEMORY]:
            raise MemoryError from exc
        raise Skipped(f"its part {name} is not well-formed XML ({exc}); the file may be damaged") from exc


class _StyleTable(_Handler):
    """Which paragraph styles are headings, and of what level: "heading N" by name (Word writes the English name
    whatever the display language; the style id is localized), "Title" as level 1, or an outline level, directly
    or through the style a style is based on."""

    def __init__(self) -> None:
        self._current: dict[str, str] | None = None
        self._styles: dict[str, dict[str, str]] = {}

    def start(self, name: str, attributes: dict[str, str]) -> None:
        if name == _STYLE:
            paragraph = attributes.get(_TYPE, "paragraph") == "paragraph"
            self._current = {"id": attributes.get(_STYLE_ID, "")} if paragraph else None
        elif self._current is not None and name in (_NAME, _BASED_ON, _OUTLINE):
            self._current[name] = attributes.get(_VAL, "")

    def end(self, name: str) -> None:
        if name == _STYLE and self._current is not None:
            self._styles[self._current["id"]] = self._current
            self._current = None

    def heading_levels(self) -> dict[str, int]:
        levels: dict[str, int] = {}
        for style_id in self._styles:
            level = self._level(style_id, set())
            if level is not None:
                levels[style_id] = level
        return levels

    def _level(self, style_id: str, seen: set[str]) -> int | None:
        style = self._styles.get(style_id)
        if style is None or style_id in seen:
            return None
        seen.add(style_id)
        name = style.get(_NAME, "").strip().lower()
        if name == "title":
            return 1  # a level of its own would put the title before every heading path
        found = _HEADING_NAME.fullmatch(name)
        if found:
            return int(found[1])
        outline = _outline_level(style.get(_OUTLINE))
        if outline is not None:
            return outline
        return self._level(style[_BASED_ON], seen) if _BASED_ON in style else None


def _outline_level(value: str | None) -> int | None:
    """The heading level (1-9) of a Word outline level, or None for body text and nonsense."""
    if value is None or not value.isdigit() or int(value) >= _BODY_TEXT_OUTLINE:
        return None
    return int(value) + 1


class _Paragraph:
    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.level: int | None = None


class _PartText(_Handler):
    """The text of one part as sections: paragraphs gathered from expat's callbacks, a new section at each
    heading paragraph."""

    def __init__(self, name: str, budget: TextBudget, heading_levels: dict[str, int]) -> None:
        self._name = name
        self._budget = budget
        self._levels = heading_levels
        self._paragraphs: list[_Paragraph] = []  # nested: a text box's paragraphs sit inside a paragraph
        self._in_text = 0
        self._path: list[tuple[int, str]] = []
        self._lines: list[str] = []
        self._has_body = False
        self._sections: list[Section] = []

    def start(self, name: str, attributes: dict[str, str]) -> None:
        if name == _TEXT:
            self._in_text += 1
        elif name == _PARAGRAPH:
            self._paragraphs.append(_Paragraph())
        elif name == _TAB:
            self._add("\t")
        elif name in (_BREAK, _CARRIAGE):
            self._add("\n")
        elif name == _STYLE_REF and self._paragraphs:
            self._paragraphs[-1].level = self._levels.get(attributes.get(_VAL, ""))
        elif name == _OUTLINE and self._paragraphs:
            self._paragraphs[-1].level = _outline_level(attributes.get(_VAL))

    def end(self, name: str) -> None:
        if name == _TEXT:
            self._in_text -= 1
        elif name == _PARAGRAPH and self._paragraphs:
            self._paragraph(self._paragraphs.pop())

    def characters(self, data: str) -> None:
        if self._in_text:
            self._add(data)

    def finish(self) -> list[Section]:
        self._flush()
        return self._sections

    def _add(self, text: str) -> None:
        if self._paragraphs:
            self._paragraphs[-1].pieces.append(self._budget.take(text))
        else:  # text outside any paragraph (Word never writes it, but it is text)
            self._lines.append(self._budget.take(text))
            self._has_body = True

    def _paragraph(self, paragraph: _Paragraph) -> None:
        text = "".join(paragraph.pieces).strip()
        if paragraph.level is not None and (name := heading_text(text)):
            self._flush()
            while self._path and self._path[-1][0] >= paragraph.level:
                self._path.pop()
            self._path.append((paragraph.level, name))
            self._lines = [name]
        elif text:
            self._lines.append(text)
            self._has_body = True

    def _flush(self) -> None:
        if self._has_body:
            name = PATH_SEPARATOR.join(name for _, name in self._path) or None
            self._sections.append(Section("\n\n".join(self._lines).strip(), section=name))
        self._lines = []
        self._has_body = False
