"""The window's own pages, before the server answers and after it stops: plain HTML, every text escaped."""

from __future__ import annotations

import html
import json
import re
import signal
from collections.abc import Sequence

_SECRET = re.compile(r"([?&]token=)[A-Za-z0-9_-]+")

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; background: #fbf8f4; color: #2b2118;
       display: flex; align-items: center; justify-content: center; height: 100vh; }
main { width: min(640px, 90vw); }
h1 { font-size: 1.6rem; margin: 0 0 .4rem; }
p { margin: .4rem 0 1rem; line-height: 1.4; }
.bar { height: 6px; background: #eadfd3; border-radius: 3px; overflow: hidden; }
.bar div { height: 100%; width: 35%; background: #c2541b; border-radius: 3px;
           animation: move 1.4s ease-in-out infinite; }
@keyframes move { 0% { margin-left: -35%; } 100% { margin-left: 100%; } }
pre { background: #f1e9e0; padding: .8rem; border-radius: 6px; max-height: 45vh; overflow: auto;
      white-space: pre-wrap; font-size: .8rem; }
button { font-size: 1rem; padding: .5rem 1.4rem; border: 0; border-radius: 6px; background: #c2541b;
         color: white; cursor: pointer; }
"""


def splash_page(status: str) -> str:
    """Shown while the server starts; :func:`status_script` updates the line under the bar."""
    return _page(
        "Starting Hearth",
        f"""<h1>Starting Hearth…</h1>
<div class="bar"><div></div></div>
<p id="status">{html.escape(status)}</p>""",
    )


def status_script(status: str) -> str:
    """JavaScript that puts ``status`` under the splash's bar (the text travels as a JSON string)."""
    return f"(function(s){{var e=document.getElementById('status'); if(e) e.textContent=s;}})({json.dumps(status)})"


def stopped_page(what: str, lines: Sequence[str]) -> str:
    """Shown when the server ended by itself: what happened, its last words, and a Restart button (which calls
    the window's ``restart``)."""
    printed = _SECRET.sub(r"\1…", "\n".join(lines[-20:]))  # the dead start's page secret is nobody's business
    said = html.escape(printed) if lines else "It printed nothing."
    return _page(
        "Hearth stopped",
        f"""<h1>Hearth stopped</h1>
<p>{html.escape(what)} Your conversations and documents are kept.</p>
<p><button id="restart" autofocus onclick="this.disabled=true; this.textContent='Restarting…'; restartServer()"
>Restart</button></p>
<script>
// The window's bridge (window.pywebview.api) is set up a moment after a page loads: a click before it is there
// waits for it instead of failing (seen when Restart was pressed as soon as the page showed).
function restartServer() {{
  var api = window.pywebview && window.pywebview.api;
  if (api && typeof api.restart === "function") {{ api.restart(); return; }}
  setTimeout(restartServer, 100);
}}
</script>
<p>What it printed last:</p>
<pre>{said}</pre>""",
    )


def exit_words(code: int) -> str:
    """How the server's exit status reads to a person."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"The Hearth server was ended by {name}."
    return f"The Hearth server exited (status {code})."


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><main>{body}</main></body></html>"
    )
