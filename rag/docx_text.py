"""The text of a Word (.docx) file, read as a stream with bounded memory.

Same parts and the same text as docx2txt (headers, the body, footers; tabs and line breaks kept, a blank line
between paragraphs), but docx2txt reads each part whole into memory and builds an ElementTree of it: 10 million
nested paragraphs in a 160 KB file took 3 minutes and 3 GB, and a DTD's entities, which expat expands up to 100
times the input, turned 400 KB into gigabytes of text. Here the archive is checked first (:mod:`rag.archive`),
then each part is fed to expat in small pieces: no tree is kept, nesting is bounded, a DTD (which Word never writes)
is refused, and the text is counted against the limit as it is found.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from xml.parsers import expat

from rag.archive import PartReader, checked_parts, entry_count_problem
from rag.limits import ReadLimits
from rag.sections import Section, Skipped, TextBudget

_WORD = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_TEXT, _TAB, _BREAK, _CARRIAGE, _PARAGRAPH = (f"{_WORD} {name}" for name in ("t", "tab", "br", "cr", "p"))
_HEADER = re.compile(r"word/header[0-9]*\.xml")
_FOOTER = re.compile(r"word/footer[0-9]*\.xml")
_BODY = "word/document.xml"


def is_text_part(name: str) -> bool:
    return name == _BODY or bool(_HEADER.fullmatch(name) or _FOOTER.fullmatch(name))


def _order(info: zipfile.ZipInfo) -> int:
    name = info.filename
    return 0 if _HEADER.fullmatch(name) else 1 if name == _BODY else 2


def docx_sections(path: Path, limits: ReadLimits, budget: TextBudget) -> list[Section]:
    problem = entry_count_problem(path, limits)
    if problem:
        raise Skipped(problem)
    try:
        with zipfile.ZipFile(path) as archive:
            parts = sorted(checked_parts(archive, is_text_part, limits), key=_order)
            if not any(info.filename == _BODY for info in parts):
                raise Skipped(f"it is not a Word document (it has no {_BODY}); it may be damaged")
            reader = PartReader(archive, limits)
            pieces: list[str] = []
            for info in parts:
                _PartText(info.filename, limits, budget, pieces).feed(reader, info)
    except zipfile.BadZipFile as exc:
        raise Skipped(f"the Word file cannot be read ({exc}); it may be damaged") from exc
    return [Section("".join(pieces).strip())]


class _PartText:
    """The text of one XML part, gathered by expat's callbacks; nothing else of the XML is kept."""

    def __init__(self, name: str, limits: ReadLimits, budget: TextBudget, pieces: list[str]) -> None:
        self._name = name
        self._limits = limits
        self._budget = budget
        self._pieces = pieces
        self._depth = 0
        self._in_text = 0

    def feed(self, reader: PartReader, info: zipfile.ZipInfo) -> None:
        parser = expat.ParserCreate(namespace_separator=" ")
        parser.buffer_text = True
        parser.StartDoctypeDeclHandler = self._refuse_dtd
        parser.EntityDeclHandler = self._refuse_dtd
        parser.StartElementHandler = self._start
        parser.EndElementHandler = self._end
        parser.CharacterDataHandler = self._characters
        try:
            for chunk in reader.chunks(info):
                parser.Parse(chunk, False)
            parser.Parse(b"", True)
        except expat.ExpatError as exc:
            if exc.code == expat.errors.codes[expat.errors.XML_ERROR_NO_MEMORY]:
                raise MemoryError from exc
            raise Skipped(f"its part {self._name} is not well-formed XML ({exc}); the file may be damaged") from exc

    def _refuse_dtd(self, *_: object) -> None:
        raise Skipped(
            f"its part {self._name} declares a DTD (XML entities), which Word never writes and which can expand to "
            "gigabytes; it was not read"
        )

    def _start(self, name: str, _attributes: object) -> None:
        self._depth += 1
        if self._depth > self._limits.max_xml_depth:
            raise Skipped(
                f"its part {self._name} nests elements more than {self._limits.max_xml_depth:,} levels deep, which "
                "no real document does; it was not read"
            )
        if name == _TEXT:
            self._in_text += 1
        elif name == _TAB:
            self._add("\t")
        elif name in (_BREAK, _CARRIAGE):
            self._add("\n")

    def _end(self, name: str) -> None:
        self._depth -= 1
        if name == _TEXT:
            self._in_text -= 1
        elif name == _PARAGRAPH:
            self._add("\n\n")

    def _characters(self, data: str) -> None:
        if self._in_text:
            self._add(data)

    def _add(self, text: str) -> None:
        self._pieces.append(self._budget.take(text))
