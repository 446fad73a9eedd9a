"""The page answers only its owner: the rules, pure.

On loopback the Host and Origin rules (``app.api.policy``) keep other web pages out, but not other accounts on
the same computer: any process can connect to 127.0.0.1. So each start of Hearth makes a secret that only its
owner sees (printed in the owner's terminal, or handed to the owner's browser in an owner-only file), and every
page route wants proof of it: a cookie that the secret is exchanged for once. ``/v1`` has its own key instead.

The exchange: ``GET /?token=SECRET`` answers with the cookie and a redirect to ``/``, so the secret leaves the
address bar at once. The cookie is HttpOnly (no script in the page can read it) and SameSite=Lax (no other site's
request carries it, except a plain link, which the Origin rule and Gradio's own request shape refuse anyway).
Browsers send a cookie set by 127.0.0.1 to every port of 127.0.0.1, so it is named after the port: two Hearths
on two ports each keep their own.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

TOKEN_PARAM = "token"
COOKIE_PREFIX = "hearth-page-"
ENTRY_PATH = "/"


def new_page_secret() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class PageGate:
    port: int
    secret: str

    @property
    def cookie_name(self) -> str:
        return f"{COOKIE_PREFIX}{self.port}"

    def entry_path(self) -> str:
        """Where the owner's browser goes first: the page, with the secret to exchange."""
        return f"{ENTRY_PATH}?{TOKEN_PARAM}={self.secret}"

    def matches(self, candidate: str | None) -> bool:
        # Constant time, so the secret cannot be found a character at a time from how fast it is refused.
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.secret.encode())

    def admits(self, cookie_header: str | None) -> bool:
        """Whether a request with this Cookie header carries this start's secret."""
        return self.matches(cookie_value(cookie_header, self.cookie_name))

    def set_cookie(self) -> str:
        """The Set-Cookie value that admits the browser until this Hearth stops (a session cookie)."""
        return f"{self.cookie_name}={self.secret}; Path=/; HttpOnly; SameSite=Lax"


def cookie_value(cookie_header: str | None, name: str) -> str | None:
    if not cookie_header:
        return None
    cookies: SimpleCookie = SimpleCookie()
    try:
        cookies.load(cookie_header)
    except CookieError:
        return None
    morsel = cookies.get(name)
    return morsel.value if morsel is not None else None


def offered_token(path: str, query_string: bytes) -> str | None:
    """The secret a request offers in exchange for the cookie (``GET /?token=…``), or None when it offers none."""
    if path != ENTRY_PATH or not query_string:
        return None
    try:
        values = parse_qs(query_string.decode("ascii"), keep_blank_values=True).get(TOKEN_PARAM)
    except (UnicodeDecodeError, ValueError):
        return None
    return values[0] if values else None


def wants_page(method: str, path: str, accept: str | None) -> bool:
    """A person opening the address (an HTML navigation), who should get the short "how to get in" page rather
    than an error object."""
    return method in ("GET", "HEAD") and (path == ENTRY_PATH or "text/html" in (accept or ""))
