"""The text of a Markdown file as sections, one per heading, without Markdown's markup.

The file is rendered to HTML by markdown-it (CommonMark with tables) and read like any HTML page
(:mod:`rag.reading.html_text`): headings become the section path instead of "#"/"##" lines, links keep their text, code
blocks keep their layout without fences, and table rows read as "header: value; …" instead of pipes. A line-based
splitter took "#" lines inside code blocks for headings and joined lines with Markdown's hard-break spaces.

Documentation written for Sphinx's MyST (pip's, for one) puts notes in fences such as ```` ```{note} ````; their
content is Markdown and is read as such, under a label ("Note", "New in version 10.0"); a role such as
``{pypi}`requests` `` reads as its text, and a target line such as ``(repeatability)=`` is left out.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

from rag.reading.html_text import html_sections
from rag.reading.sections import Section, TextBudget

# MyST directives whose body is prose, and how Sphinx labels them ({} takes the directive's argument).
_PROSE_DIRECTIVES = {
    "note": "Note",
    "tip": "Tip",
    "hint": "Hint",
    "important": "Important",
    "warning": "Warning",
    "caution": "Caution",
    "attention": "Attention",
    "danger": "Danger",
    "error": "Error",
    "seealso": "See also",
    "admonition": "{}",
    "versionadded": "New in version {}",
    "versionchanged": "Changed in version {}",
    "deprecated": "Deprecated since version {}",
}
_DIRECTIVE = re.compile(r"\{([A-Za-z][\w-]*)\}\s*(.*)")
_ROLE = re.compile(r"\{[A-Za-z][\w:.-]*\}(?=`)")
# A MyST target, "(label)=" on a line of its own before a heading: a name for links, not text.
_TARGET = re.compile(r"^\([\w.-]+\)=[ \t]*$", re.MULTILINE)
# Directives inside directives read as prose this deep; deeper ones read as code (no unbounded recursion).
MAX_DIRECTIVE_DEPTH = 4


def markdown_sections(text: str, budget: TextBudget) -> list[Section]:
    return html_sections(render_markdown(text), budget)


def render_markdown(text: str, depth: int = 0, env: dict[str, Any] | None = None) -> str:
    """HTML of ``text``; ``env`` carries the outer document's link references into a directive's body."""
    from markdown_it import MarkdownIt

    # CommonMark's preset bounds nesting (block quotes in lists in …), so the rendered page stays shallow.
    renderer = MarkdownIt("commonmark", {"html": True}).enable("table")
    from markdown_it.renderer import RendererHTML

    default_fence = RendererHTML().rules["fence"]

    def fence(_renderer: Any, tokens: Sequence[Any], index: int, options: Any, env: Any) -> str:
        token = tokens[index]
        found = _DIRECTIVE.fullmatch(token.info.strip())
        if found is None or found[1].lower() not in _PROSE_DIRECTIVES or depth >= MAX_DIRECTIVE_DEPTH:
            return str(default_fence(tokens, index, options, env))
        label = _PROSE_DIRECTIVES[found[1].lower()].format(found[2]).strip()
        body = render_markdown(token.content, depth + 1, dict(env))
        return f"<div><p>{html.escape(label)}</p>{body}</div>\n"

    renderer.add_render_rule("fence", fence)
    return str(renderer.render(_TARGET.sub("", _ROLE.sub("", text)), env if env is not None else {}))
