"""How documents become passage text: sections by heading, clean text, table rows that name their columns."""

from __future__ import annotations

import pytest

from rag.chunking import searchable_text
from rag.reading.clean_text import clean_text
from rag.reading.csv_rows import csv_sections
from rag.reading.html_text import html_sections
from rag.reading.limits import ReadLimits
from rag.reading.markdown_text import markdown_sections
from rag.reading.pdf_outline import Bookmark, Outline, without_running_lines
from rag.reading.sections import Section, Skipped, TextBudget


def budget() -> TextBudget:
    return TextBudget(ReadLimits())


SPHINX_PAGE = """<html><head><title>json — JSON encoder — Python 3.11 documentation</title></head><body>
<div class="related" role="navigation"><ul><li><a href="index.html">index</a> |</li></ul></div>
<div class="body" role="main">
<section id="json"><h1>json — JSON encoder<a class="headerlink" href="#json" title="Permalink">¶</a></h1>
<p>JSON is a lightweight data interchange format.</p>
<section id="basic-usage"><h2>Basic Usage<a class="headerlink" href="#basic-usage">¶</a></h2>
<dl class="py function"><dt class="sig" id="json.dumps">
<span class="sig-prename descclassname"><span class="pre">json.</span></span><span class="sig-name descname"><span
class="pre">dumps</span></span><span class="sig-paren">(</span><em class="sig-param"><span class="n"><span
class="pre">obj</span></span></em>, <em class="sig-param"><span class="o"><span class="pre">*</span></span></em>,
<em class="sig-param"><span class="n"><span class="pre">skipkeys</span></span><span class="o"><span
class="pre">=</span></span><span class="default_value"><span class="pre">False</span></span></em><span
class="sig-paren">)</span><a class="headerlink" href="#json.dumps">¶</a></dt>
<dd><p>Serialize <em>obj</em> to a JSON formatted&nbsp;<code>str</code>.\u200b</p></dd></dl>
<table><thead><tr><th>JSON</th><th>Python</th></tr></thead>
<tbody><tr><td>object</td><td>dict</td></tr><tr><td>array</td><td>list</td></tr></tbody></table>
<pre>for item in items:
    print(item)</pre>
</section></section></div>
<div class="sphinxsidebar" role="navigation"><h3>Table of Contents</h3><p>Previous topic</p></div>
<script>var tracking = 1;</script></body></html>"""


def test_html_sections_follow_headings_and_read_as_a_person_sees_them() -> None:
    intro, usage = html_sections(SPHINX_PAGE, budget())
    assert intro == Section(
        "json — JSON encoder\nJSON is a lightweight data interchange format.", section="json — JSON encoder"
    )
    assert usage.section == "json — JSON encoder › Basic Usage"
    assert usage.text.splitlines() == [
        "Basic Usage",
        "json.dumps(obj, *, skipkeys=False)",
        "Serialize obj to a JSON formatted str.",
        "",
        "JSON: object; Python: dict",
        "JSON: array; Python: list",
        "",
        "for item in items:",
        "    print(item)",
    ]
    everything = intro.text + usage.text
    for noise in ("¶", "\u200b", "index", "Table of Contents", "tracking", "|"):
        assert noise not in everything


def test_html_without_headings_is_one_section_named_by_its_title() -> None:
    page = "<html><head><title>Owls</title></head><body><p>Owls <b>hunt</b> at night.</p></body></html>"
    assert html_sections(page, budget()) == [Section("Owls hunt at night.", section="Owls")]


def test_deeply_nested_html_is_read_without_recursion() -> None:
    page = "<div>" * 20_000 + "deep" + "</div>" * 20_000
    assert html_sections(page, budget()) == [Section("deep")]


MARKDOWN = """(install)=
# Install

Run `pip install hearth`.

## From source

```
# not a heading
make run
```

```{note}
Read the [guide][g] first.
```

| Option | Meaning |
|--------|---------|
| `--no-deps` | skip dependencies |

[g]: https://example.org/guide
"""


def test_markdown_sections_carry_heading_paths_and_no_markup() -> None:
    install, source = markdown_sections(MARKDOWN, budget())
    assert install == Section("Install\nRun pip install hearth.", section="Install")
    assert source.section == "Install › From source"
    assert source.text.splitlines() == [
        "From source",
        "# not a heading",
        "make run",
        "",
        "Note",
        "",
        "Read the guide first.",
        "",
        "Option: --no-deps; Meaning: skip dependencies",
    ]


def test_csv_rows_name_their_columns_and_are_sectioned_by_their_first_value() -> None:
    lines = ["version,codename,eol\n", "6.06 LTS,Dapper Drake,\n", "6.10,Edgy Eft,2008-04-25,extra\n", ",,\n"]
    assert csv_sections(lines, budget()) == [
        Section("version: 6.06 LTS; codename: Dapper Drake", section="version: 6.06 LTS"),
        Section("version: 6.10; codename: Edgy Eft; eol: 2008-04-25; column 4: extra", section="version: 6.10"),
    ]


def test_a_broken_csv_is_refused_with_a_reason() -> None:
    with pytest.raises(Skipped, match="cannot be parsed"):
        csv_sections(["a,b\n", "x" * 200_000 + ",y\n"], budget())  # a cell past the csv module's field limit


def test_clean_text_removes_invisible_characters_permalinks_and_bar_lines() -> None:
    raw = "Basic Usage ¶\nsoft\u00adhyphen zero\u200bwidth no\u00a0break\n|\n | |\n\n\n\nend ¶ stays"
    assert clean_text(raw) == "Basic Usage\nsofthyphen zerowidth no break\n\nend ¶ stays"


def test_pdf_pages_split_at_their_bookmarked_headings() -> None:
    outline = Outline([Bookmark(0, 0, "Shell Syntax"), Bookmark(1, 1, "Quoting"), Bookmark(1, 1, "Comments")])
    first = outline.split_page("Title page\n1 Shell Syntax\nThe shell reads input.", 1)
    second = outline.split_page("more syntax\n3.1.2 Quoting\nQuotes keep text.\nComments\n# ignored", 2)
    assert first == [
        Section("Title page", page=1),
        Section("1 Shell Syntax\nThe shell reads input.", page=1, section="Shell Syntax"),
    ]
    assert second == [
        Section("more syntax", page=2, section="Shell Syntax"),
        Section("3.1.2 Quoting\nQuotes keep text.", page=2, section="Shell Syntax › Quoting"),
        Section("Comments\n# ignored", page=2, section="Shell Syntax › Comments"),
    ]


def test_a_heading_alone_at_a_page_end_names_the_next_page_instead_of_a_passage() -> None:
    outline = Outline([Bookmark(0, 0, "Intro"), Bookmark(0, 0, "Usage")])
    assert outline.split_page("Intro\nWelcome.\nUsage", 1) == [Section("Intro\nWelcome.", page=1, section="Intro")]
    assert outline.split_page("Run it.\n17", 2) == [Section("Run it.\n17", page=2, section="Usage")]
    assert outline.split_page("18", 3) == []


def test_running_headers_and_footers_are_removed() -> None:
    pages = [f"Chapter 3: Basics {n}\nText of page {n}.\nPage {n}" for n in range(10, 20)]
    cleaned = without_running_lines(pages)
    assert cleaned[0] == "Text of page 10."
    assert without_running_lines(["one\ntwo", "three"]) == ["one\ntwo", "three"]


def test_one_line_pages_keep_their_text() -> None:
    """A PDF whose every page is one line that differs only in its numbers (a table of readings, slides) is text,
    not a running header: nothing is cut."""
    pages = [f"Reading {n}: pressure {n * 3} kPa" for n in range(30)]
    assert without_running_lines(pages) == pages


def test_a_passage_is_searched_under_its_heading_path_without_repeating_its_own_heading() -> None:
    text = "Conditional Constructs\nif test-commands; then consequent-commands; fi"
    section = "Basic Shell Features › Shell Commands › Conditional Constructs"
    assert searchable_text(text, section) == f"Basic Shell Features › Shell Commands\n{text}"
    assert searchable_text("version: 6.06 LTS; codename: Dapper Drake", "version: 6.06 LTS").startswith("version")
    assert searchable_text("Plain text.", None) == "Plain text."


def test_ligatures_read_as_their_letters() -> None:
    assert clean_text("The ﬁle ﬂag is oﬀ; eﬃcient, baﬄed") == "The file flag is off; efficient, baffled"
