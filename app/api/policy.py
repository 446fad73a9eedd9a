"""Who may talk to this server: pure rules over the Host, Origin and Authorization headers.

A web page the user has open elsewhere must not be able to drive the chat, read conversations or call the API.
Two attacks matter (Ollama's CVE-2024-28224 combined them): DNS rebinding, where ``evil.example`` resolves to
127.0.0.1 so the browser treats this server as that site's own (it still sends ``Host: evil.example``, so only
names of this machine are answered), and cross-site requests, which carry the foreign page's ``Origin`` (so only
this server's own origin and the configured allowlist are answered). Requests without ``Origin`` come from
programs or same-origin navigation, which a foreign page cannot forge.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.api.errors import KeyRefused, Refused

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
API_PREFIX = "/v1"


@dataclass(frozen=True)
class AccessPolicy:
    port: int
    hosts: frozenset[str]  # lower case, IPv6 without brackets
    origins: frozenset[str]  # normalised: scheme://host[:port]
    exposed: bool  # bound beyond loopback: the page needs the key too

    def names(self) -> str:
        return ", ".join(sorted(_with_brackets(host) for host in self.hosts))


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def access_policy(
    bind_host: str,
    port: int,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    machine_names: Iterable[str] = (),
) -> AccessPolicy:
    """The rules for a server bound to ``bind_host``. ``machine_names`` (this machine's host name and interface
    addresses, probed by the caller) are answered only when bound to every interface, where they are how other
    machines reach it."""
    hosts = set(LOOPBACK_NAMES)
    bind = bind_host.strip("[]").lower()
    if bind in WILDCARD_HOSTS:
        hosts.update(name.strip("[]").lower() for name in machine_names)
    else:
        hosts.add(bind)
    hosts.update(name.strip("[]").lower() for name in allowed_hosts)
    hosts.discard("")
    return AccessPolicy(
        port, frozenset(hosts), frozenset(normalize_origin(o) for o in allowed_origins), not is_loopback(bind_host)
    )


def split_host(value: str) -> tuple[str, int | None] | None:
    """``"[::1]:7860"`` -> ``("::1", 7860)``; None when it cannot be a host header at all."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        name, _, port_text = value.partition(":")
        port_text = port_text if ":" in value else None
    if not name:
        return None
    if port_text is None:
        return name.lower(), None
    if not port_text.isdigit() or len(port_text) > 5:
        return None
    return name.lower(), int(port_text)


def normalize_origin(origin: str) -> str:
    """``HTTP://LocalHost:80/`` -> ``http://localhost``: one spelling per origin, for comparison."""
    parts = urlsplit(origin.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        return origin.strip().lower()
    host = (parts.hostname or "").lower()
    if not scheme or not host:
        return origin.strip().lower()  # "null" (a sandboxed page or a file) and other opaque origins stay as sent
    default = {"http": 80, "https": 443}.get(scheme)
    shown = _with_brackets(host)
    return f"{scheme}://{shown}" if port is None or port == default else f"{scheme}://{shown}:{port}"


def check_host(policy: AccessPolicy, host_header: str | None) -> None:
    parsed = split_host(host_header or "")
    if parsed is not None:
        name, port = parsed
        if name in policy.hosts and (port == policy.port or (port is None and policy.port == 80)):
            return
    raise Refused(
        f"This Hearth answers only requests addressed to {policy.names()} on port {policy.port}, not "
        f"{host_header or 'a request without a Host header'!r}.",
        f"Open it as http://127.0.0.1:{policy.port}/; to use another name, add it to HEARTH_SERVER__ALLOWED_HOSTS.",
        code="host_not_allowed",
    )


def check_origin(policy: AccessPolicy, origin: str | None) -> None:
    """No ``Origin``: fine (programs and same-origin navigation). Otherwise it must be this server's own origin
    (http, a name this server answers, this port) or one the user listed."""
    if origin is None or origin_allowed(policy, origin):
        return
    raise Refused(
        f"Requests from the web page at {origin} are not allowed here.",
        "If you trust that page, add its origin to HEARTH_SERVER__ALLOWED_ORIGINS, for example "
        "'[\"http://localhost:3000\"]'.",
        code="origin_not_allowed",
    )


def origin_allowed(policy: AccessPolicy, origin: str) -> bool:
    normalized = normalize_origin(origin)
    if normalized in policy.origins:
        return True
    parts = urlsplit(normalized)
    try:
        port = parts.port or 80
    except ValueError:
        return False
    return parts.scheme == "http" and (parts.hostname or "") in policy.hosts and port == policy.port


def is_cross_origin_allowed(policy: AccessPolicy, origin: str | None) -> bool:
    """Whether CORS headers should let a browser page at ``origin`` read API replies: listed origins only."""
    return origin is not None and normalize_origin(origin) in policy.origins


def needs_key(path: str) -> bool:
    return path == API_PREFIX or path.startswith(f"{API_PREFIX}/")


def bearer_token(authorization: str | None) -> str | None:
    if authorization is None:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def check_key(authorization: str | None, expected: str) -> None:
    token = bearer_token(authorization)
    if token is None:
        raise KeyRefused(
            "This API needs a key.",
            "Send the header 'Authorization: Bearer KEY'; `hearth api-key` prints the key (openai clients: "
            "api_key=KEY).",
            code="missing_api_key",
        )
    # Constant time, so the key cannot be guessed a character at a time from how fast it is refused.
    if not hmac.compare_digest(token.encode(), expected.encode()):
        raise KeyRefused(
            "The API key is wrong (it may have been replaced with `hearth api-key --rotate`).",
            "Use the key that `hearth api-key` prints now.",
            code="invalid_api_key",
        )


def _with_brackets(host: str) -> str:
    return f"[{host}]" if ":" in host else host
