"""Which link and image addresses stay on the page's own origin, whichever way a browser reads them. Pure."""

from __future__ import annotations

import re
from urllib.parse import quote

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
# Kept as written when a local address is put back into Markdown: no '&' (marked would decode an entity such as
# '&#47;' into '/'), no '<', '>', '\' or spaces (each ends or bends the address), nothing beyond ASCII.
_KEEP = "/?#=%:@!$'()*+,;-._~"


def is_local_url(url: str) -> bool:
    """True for a relative address (``notes.png``, ``/file``, ``#part``, ``?q=1``) that resolves against the page.

    Anything with a scheme (``http:``, ``data:``, ``javascript:``) or an authority (``//host``) is not, and
    neither is an address with a backslash, a space or a control character: browsers read ``/\\host`` as
    ``//host`` and drop tabs and newlines anywhere in a URL, so such an address can reach another host.
    """
    if not url or _SCHEME.match(url) or url.startswith("//"):
        return False
    return not any(ch == "\\" or ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url)


def encode_local_url(url: str) -> str:
    """A local address written so that no Markdown or HTML reader can change it (percent-encoded beyond a safe
    set of characters)."""
    if not is_local_url(url):
        raise ValueError(f"not a local address: {url!r}")
    return quote(url, safe=_KEEP)
