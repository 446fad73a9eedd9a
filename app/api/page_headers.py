"""Security headers on every response of the port: the page, its assets, Gradio's routes and the API.

The Content-Security-Policy is the page's last line against exfiltration: whatever an answer or a document manages
to put into the page, the browser loads nothing from another origin (no image, media, style, font, frame,
connection, worker, object, form target or base URL). Beyond ``'self'`` it allows only what Gradio's own page was
seen to need in Chromium (tests/e2e/test_page_security.py fails on any violation), and nothing in it names another
host.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP_DIRECTIVES: tuple[tuple[str, str], ...] = (
    ("default-src", "'self'"),
    # Gradio's index page carries its config and three small loaders as inline scripts (the config differs per
    # request, so no hash can name it), and gr.HTML compiles its template with Function(): 'unsafe-eval'.
    ("script-src", "'self' 'unsafe-inline' 'unsafe-eval'"),
    # Svelte sets inline style attributes and Gradio injects <style> elements (theme, the page's CSS).
    ("style-src", "'self' 'unsafe-inline'"),
    # The chat's KaTeX and Gradio's icons use data: URLs, which are made in the page and fetch nothing.
    ("img-src", "'self' data:"),
    ("font-src", "'self' data:"),
    ("object-src", "'none'"),
    ("base-uri", "'self'"),
    ("form-action", "'self'"),
    ("frame-ancestors", "'self'"),
)
CONTENT_SECURITY_POLICY = "; ".join(f"{name} {value}" for name, value in CSP_DIRECTIVES)

SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "SAMEORIGIN"),  # frame-ancestors, for browsers and web views that predate it
)


class SecurityHeaders:
    """Sets :data:`SECURITY_HEADERS` on every HTTP response, in place of any value the app set itself."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS:
                    headers[name] = value
            await send(message)

        await self._app(scope, receive, sending)
