"""The Markdown rewriter between answers (or messages, or documents) and the page: nothing it writes can name an
address off the page's origin, as image, link or HTML; what people should see still renders."""

from __future__ import annotations

import inspect
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from app.ui.local_url import encode_local_url, is_local_url
from app.ui.render import for_chatbot
from app.ui.safe_markdown import literal, safe_markdown
from tests.hostile_markdown import hostile_markdown

ATTACKER = "http://attacker.invalid"
PAYLOADS = hostile_markdown(ATTACKER)
# Attributes through which HTML makes a browser fetch or go somewhere.
URL_ATTRIBUTES = {"src", "href", "srcset", "poster", "data", "style", "action", "background", "xlink:href"}
ALLOWED_TAGS = {
    *("p", "em", "strong", "s", "code", "pre", "a", "img", "ul", "ol", "li", "blockquote", "hr", "br"),
    *("h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td"),
}


class Fetches(HTMLParser):
    """Every tag, and every address an attribute names, in rendered HTML."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.addresses: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.addresses += [value or "" for name, value in attrs if name in URL_ATTRIBUTES]


def rendered(markdown: str) -> Fetches:
    """``markdown`` rendered by a CommonMark renderer that passes raw HTML through, as marked does."""
    renderer = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    found = Fetches()
    found.feed(renderer.render(markdown))
    return found


def test_the_checker_sees_what_a_browser_would_fetch() -> None:
    raw = rendered(PAYLOADS["escaped-bracket"] + "\n\n" + PAYLOADS["video-poster"])
    assert any("attacker.invalid" in address for address in raw.addresses)
    assert "video" in raw.tags


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_no_form_of_a_remote_address_survives(name: str) -> None:
    safe = safe_markdown(PAYLOADS[name])
    found = rendered(safe)
    assert found.tags <= ALLOWED_TAGS, safe
    assert all(is_local_url(address) for address in found.addresses), (safe, found.addresses)
    assert "attacker.invalid" not in "".join(found.addresses)
    # Shown, not dropped silently: the address (or the raw HTML) stays readable as text.
    assert "attacker.invalid" in safe


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_rewriting_is_stable(name: str) -> None:
    once = safe_markdown(PAYLOADS[name])
    assert safe_markdown(once) == once


def test_the_issue_variants_become_text_with_the_address_as_code() -> None:
    assert safe_markdown(r"![a\]b](http://host/x.png)") == r"\[image: a]b] (`http://host/x.png`)"
    assert safe_markdown("![a[b]c](http://host/x.png)") == r"\[image: a[b]c] (`http://host/x.png`)"
    assert safe_markdown(r"![x](http:\/\/host/x.png)") == r"\[image: x] (`http://host/x.png`)"
    assert safe_markdown("![x](&#104;ttp://host/x.png)") == r"\[image: x] (`http://host/x.png`)"
    reference = safe_markdown("See ![chart][r] now.\n\n[r]: http://host/x.png")
    assert reference == "See [image: chart] (`http://host/x.png`) now."
    assert safe_markdown("x ~~~ <img src=http://host/x.png> ~~~") == (r"x \~\~\~ \<img src=http\://host/x.png> \~\~\~")
    # Code stays code: marked shows it as typed, escaped.
    assert safe_markdown("`<img src=http://host/x.png>`") == "`<img src=http://host/x.png>`"


def test_links_off_the_page_become_text_and_local_ones_stay_links() -> None:
    text = "[docs](https://example.org/a?b=1) and [notes](notes.md#intro) and <https://example.org>"
    assert safe_markdown(text) == (
        "docs (`https://example.org/a?b=1`) and [notes](<notes.md#intro>) and `https://example.org`"
    )
    # marked would link these by itself (GFM autolinks): the escapes keep them text.
    assert safe_markdown("see https://example.org, www.example.org or me@example.org") == (
        r"see https\://example.org, www\.example.org or me\@example.org"
    )


def test_local_images_stay_images() -> None:
    assert safe_markdown("![chart](plots/chart.png)") == "![chart](<plots/chart.png>)"
    assert safe_markdown("![x](//host/x.png)") == r"\[image: x] (`//host/x.png`)"


def test_what_people_should_see_still_renders() -> None:
    text = (
        "# Plan\n\nIn 1852 [1], the *keeper* wrote **this** and `code` ~~gone~~.\n\n"
        "- one\n- two\n  - nested\n\n3. three\n4. four\n\n> quoted\n\n"
        "```python\nprint('<b>hi</b>')\n```\n\n| a | b |\n|:--|--:|\n| 1 | 2 |\n\n***\n\n5 * 3 = 15, snake_case"
    )
    assert safe_markdown(text) == (
        "# Plan\n\nIn 1852 [1], the *keeper* wrote **this** and `code` ~~gone~~.\n\n"
        "- one\n- two\n  - nested\n\n3. three\n4. four\n\n> quoted\n\n"
        "```python\nprint('<b>hi</b>')\n```\n\n| a | b |\n| :--- | ---: |\n| 1 | 2 |\n\n***\n\n5 * 3 = 15, snake_case"
    )


def test_the_structure_survives_the_rewrite() -> None:
    text = "1. Step *one*\n\n   ```sh\n   make\n   ```\n2. Step [two](#two)\n\n> a\n> b\\\n> c"
    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])

    def shape(markdown: str) -> list[tuple[str, str]]:
        return [(t.type, t.content if t.type in ("fence", "text") else "") for t in parser.parse(markdown)]

    assert shape(safe_markdown(text)) == shape(text)


def test_text_that_looks_like_syntax_stays_text() -> None:
    for text in ("1986\\. A good year", "\\# not a heading", "\\- not a list", "a \\| b", r"\*not em\*", "AT&amp;T"):
        parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
        assert parser.render(safe_markdown(text)) == parser.render(text), text


def test_unclosed_code_closes_where_the_text_ends() -> None:
    assert safe_markdown("```\npartial <img src=http://host/x.png>") == "```\npartial <img src=http://host/x.png>\n```"
    assert safe_markdown("a ``` <img src=x>") == r"a \`\`\` \<img src=x>"


def test_a_code_block_whose_text_holds_fences_gets_a_longer_fence() -> None:
    assert safe_markdown("````\n```\n<img src=x>\n```\n````") == "````\n```\n<img src=x>\n```\n````"


def test_mermaid_blocks_are_shown_as_code() -> None:
    # marked hands ```mermaid to mermaid, whose labels can carry HTML.
    assert safe_markdown("```mermaid\ngraph TD\n```") == "```\ngraph TD\n```"
    assert safe_markdown("```valueOf\nx\n```") == "```\nx\n```"  # Gradio looks languages up in a plain object
    assert safe_markdown("```c++ extra words\nx\n```") == "```c++\nx\n```"


def test_cleandoc_leaves_a_message_as_written() -> None:
    # A message that is one list item holding a code block: without the leading newline, Gradio's cleandoc would
    # strip the indentation and let the block's lines out of it.
    message = safe_markdown("- ```\n  <img src=http://host/x.png>\n  ```")
    assert message == "- ```\n  <img src=http://host/x.png>\n  ```"
    assert inspect.cleandoc(message) != message
    assert inspect.cleandoc(for_chatbot(message)) == message


def test_literal_shows_text_exactly_on_one_line() -> None:
    assert literal("a *b*\n\n![x](http://h/p.png) <i>") == r"a \*b\* \!\[x\]\(http\:\/\/h\/p\.png\) \<i\>"


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("notes.png", True),
        ("/gradio_api/file=x.png", True),
        ("#part", True),
        ("?q=1", True),
        ("", False),
        ("http://host/x", False),
        ("HTTPS://host/x", False),
        ("//host/x", False),
        ("/\\host/x", False),
        ("\\\\host/x", False),
        ("/\t/host", False),
        ("data:image/png;base64,AAAA", False),
        ("javascript:alert(1)", False),
    ],
)
def test_local_addresses(url: str, local: bool) -> None:
    assert is_local_url(url) is local


def test_a_local_address_is_written_so_that_no_reader_changes_it() -> None:
    assert encode_local_url("a&#47;&#47;b<c>ü.png") == "a%26#47;%26#47;b%3Cc%3E%C3%BC.png"
    with pytest.raises(ValueError):
        encode_local_url("http://host/x")


def test_a_growing_answer_renders_as_if_read_whole_at_every_step() -> None:
    from app.ui.streamed_markdown import StreamedMarkdown

    sections = [
        f"## Part {i}\n\nThe keeper wrote **this** [{i}].\n\n- a\n- b\n\n  still b\n\n```py\nx = {i}\n\n```\n> q\nlazy"
        for i in range(3)
    ]
    hostile = [text for name, text in PAYLOADS.items() if "reference" not in name and "definition" not in name]
    text = "\n\n".join([*sections, *hostile]) + "\r\nline\rnext\r\n\r\n1. one\n2. two"
    streamed = StreamedMarkdown()
    for end in [*range(1, len(text), 7), len(text)]:
        assert streamed.render(text[:end]) == safe_markdown(text[:end]), text[:end]
    assert streamed.render("something else") == "something else"  # not the same text grown: read afresh


def test_a_finished_answer_is_read_whole() -> None:
    from app.services.answering.chat import TurnStarted
    from app.ui.render import AnswerView
    from backends.base import Finished, TextDelta

    # A reference definition arriving last changes a paragraph above it: only the whole answer shows that.
    text = "See ![chart][r] here.\n\nMore.\n\n[r]: http://host/x.png"
    view = AnswerView([])
    view.apply(TurnStarted("c1", 0, 5))
    for word in text.split(" "):
        view.apply(TextDelta(word + " "))
    done = view.apply(Finished("stop"))[-1]["content"]
    assert done == for_chatbot(safe_markdown(text + " "))
    assert "[image: chart] (`http://host/x.png`)" in done
