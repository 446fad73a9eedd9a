"""Markdown and HTML that try to make a browser fetch an address the attacker chose: the forms a security review found
past the old pattern filter, and more of the same family. Each names its own address, ``{base}/{name}.png``, so a
request that gets through says which form let it through."""

from __future__ import annotations


def hostile_markdown(base: str) -> dict[str, str]:
    """``base`` is ``scheme://host[:port]``, for example ``http://attacker.invalid``."""
    authority = base.split("//", 1)[1]

    def url(name: str) -> str:
        return f"{base}/{name}.png"

    forms = {
        # The bypasses the issue lists.
        "escaped-bracket": "![a\\]b]({url})",
        "nested-brackets": "![a[b]c]({url})",
        "html-in-code-span": "`<img src={url}>`",
        "inline-tildes": "x ~~~ <img src={url}> ~~~",
        "escaped-slashes": "![x]({escaped_slashes})",
        "entity-scheme": "![x](&#104;{url_after_h})",
        "reference-definition": "See ![chart][r1] here.\n\n[r1]: {url}",
        "background-style": '<div style="background-image:url({url})">styled</div>',
        "video-poster": "<video poster={url}></video>",
        # More of the same family.
        "escaped-backtick": "\\`<img src={url}>`",
        "unmatched-fence-inline": "a ``` <img src={url}>",
        "entity-colon": "![x](http&#58;//{authority}/entity-colon.png)",
        "protocol-relative": "![x](//{authority}/protocol-relative.png)",
        "pointy-destination": "![x](<{url}>)",
        "image-title": '![x]({url} "a title")',
        "unbalanced-brackets": "![a]b]({url}) ![c[d]({url})",
        "image-in-link": "[![x]({url})](/elsewhere)",
        "svg-image": '<svg><image href="{url}"/></svg>',
        "stylesheet-link": "<link rel=stylesheet href={url}>",
        "object-data": "<object data={url}></object>",
        "srcset": '<img srcset="{url} 1x">',
        "style-import": "<style>@import url({url});</style>",
        "uppercase-tag": "<IMG SRC={url}>",
        "reference-in-quote": "> ![q][r2]\n>\n> [r2]: {url}",
        "reference-in-list": "- ![q][r3]\n- x\n\n[r3]: {url}",
        "entity-in-definition": "![q][r4]\n\n[r4]: &#104;{url_after_h}",
        "table-cell": "| a |\n| --- |\n| ![x]({url}) |",
        "html-after-fence": "```\ncode\n```\n<img src={url}>",
        # Gradio dedents a message whose lines after the first are all indented (inspect.cleandoc).
        "code-in-lone-list-item": "- ```\n  <img src={url}>\n  ```",
        "mermaid-label": '```mermaid\ngraph TD\n  A["<img src={url}>"]\n```',
        "latex": "$$\\href{{{url}}}{{x}}$$ and $$\\includegraphics{{{url}}}$$",
        # Gradio cuts $$…$$ out of a message before reading its Markdown, even from one code block to the next.
        "latex-across-code": "`$$` and then\n\n```\n$$<img src={url}>\n```",
        "autolink": "<{url}>",
        "html-entities": "&lt;img src={url}&gt;",
        "bare-address": "see {url} or www.attacker.invalid",
    }
    return {
        name: form.format(
            url=url(name),
            escaped_slashes=url(name).replace("//", "\\/\\/", 1),
            url_after_h=url(name)[1:],
            authority=authority,
        )
        for name, form in forms.items()
    }
