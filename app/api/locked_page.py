"""The short page a person gets who opens Hearth's plain address without its page secret: what this is, and how
to get in. No script, no style sheet: nothing the page's Content-Security-Policy would have to allow."""

from __future__ import annotations

from html import escape

_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Hearth: open it from its own address</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 4em auto; padding: 0 1em; line-height: 1.5">
<h1>Hearth is running here</h1>
<p>{lead}</p>
<p>To open it:</p>
<ul>
<li>use the address that <code>hearth ui</code> printed in its terminal (it ends in <code>?token=…</code>), or</li>
<li>start it with <code>hearth ui --open</code>, which opens your browser for you, or</li>
<li>run <code>hearth open</code> in a terminal of the account that started it.</li>
</ul>
<p>The address changes each time Hearth starts. Only the account that started Hearth can read it, so other
accounts on this computer cannot open your conversations or documents.</p>
</body>
</html>
"""

_FIRST = "This page answers only the person who started Hearth, and this browser has not shown that yet."
_STALE = (
    "That address is from an earlier start of Hearth (or was mistyped): each start makes a new one, and the old one "
    "no longer opens the page."
)


def locked_page_html(stale: bool) -> str:
    return _PAGE.format(lead=escape(_STALE if stale else _FIRST))
