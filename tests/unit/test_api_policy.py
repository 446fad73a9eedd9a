"""Host, Origin and key rules (DNS rebinding and cross-site requests, Ollama CVE-2024-28224)."""

from __future__ import annotations

import pytest

from app.api.errors import KeyRefused, Refused
from app.api.policy import (
    access_policy,
    bearer_token,
    check_host,
    check_key,
    check_origin,
    is_cross_origin_allowed,
    needs_key,
    normalize_origin,
    split_host,
)

LOCAL = access_policy("127.0.0.1", 7860)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:7860", ("127.0.0.1", 7860)),
        ("LocalHost:7860", ("localhost", 7860)),
        ("[::1]:7860", ("::1", 7860)),
        ("[::1]", ("::1", None)),
        ("example.com", ("example.com", None)),
        ("", None),
        (":7860", None),
        ("[::1", None),
        ("[::1]x", None),
        ("host:port", None),
        ("host:123456", None),
        ("::1:7860", None),  # an IPv6 address without brackets cannot carry a port
    ],
)
def test_host_headers_are_split(value: str, expected: tuple[str, int | None] | None) -> None:
    assert split_host(value) == expected


@pytest.mark.parametrize("host", ["127.0.0.1:7860", "localhost:7860", "LOCALHOST:7860", "[::1]:7860"])
def test_loopback_names_on_this_port_are_answered(host: str) -> None:
    check_host(LOCAL, host)


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:7860",  # DNS rebinding: the browser still names the attacker's host
        "evil.example",
        "127.0.0.1:7861",
        "127.0.0.1",  # port 80 implied
        "192.168.1.20:7860",
        "localhost.evil.example:7860",
        "",
        None,
    ],
)
def test_other_hosts_are_refused(host: str | None) -> None:
    with pytest.raises(Refused) as caught:
        check_host(LOCAL, host)
    assert caught.value.code == "host_not_allowed"
    assert "HEARTH_SERVER__ALLOWED_HOSTS" in caught.value.remedy


def test_a_configured_bind_address_and_extra_names_are_answered_too() -> None:
    lan = access_policy("192.168.1.20", 7860, allowed_hosts=["hearth.lan"])
    for host in ("192.168.1.20:7860", "hearth.lan:7860", "127.0.0.1:7860"):
        check_host(lan, host)
    with pytest.raises(Refused):
        check_host(lan, "10.0.0.5:7860")
    assert lan.exposed and not LOCAL.exposed


def test_every_interface_means_this_machines_own_names() -> None:
    everywhere = access_policy("0.0.0.0", 7860, machine_names=["box", "192.168.1.20", "fe80::1"])
    for host in ("box:7860", "192.168.1.20:7860", "[fe80::1]:7860", "localhost:7860"):
        check_host(everywhere, host)
    with pytest.raises(Refused):
        check_host(everywhere, "evil.example:7860")
    assert everywhere.exposed


def test_port_80_may_be_left_out() -> None:
    check_host(access_policy("127.0.0.1", 80), "localhost")


@pytest.mark.parametrize(
    "origin", [None, "http://127.0.0.1:7860", "http://localhost:7860", "http://[::1]:7860", "HTTP://LOCALHOST:7860/"]
)
def test_no_origin_or_this_servers_own_origin_is_allowed(origin: str | None) -> None:
    check_origin(LOCAL, origin)


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "https://127.0.0.1:7860",  # another scheme is another origin
        "http://127.0.0.1:3000",  # another local server, perhaps a compromised dev tool
        "http://localhost",
        "null",  # sandboxed frames and files
        "file://",
        "garbage",
    ],
)
def test_other_origins_are_refused(origin: str) -> None:
    with pytest.raises(Refused) as caught:
        check_origin(LOCAL, origin)
    assert caught.value.code == "origin_not_allowed"
    assert "HEARTH_SERVER__ALLOWED_ORIGINS" in caught.value.remedy


def test_listed_origins_are_allowed_and_get_cors() -> None:
    policy = access_policy("127.0.0.1", 7860, allowed_origins=["http://localhost:3000/"])
    check_origin(policy, "http://LOCALHOST:3000")
    assert is_cross_origin_allowed(policy, "http://localhost:3000")
    assert not is_cross_origin_allowed(policy, "http://127.0.0.1:7860")  # same origin needs no CORS
    assert not is_cross_origin_allowed(policy, None)
    with pytest.raises(Refused):
        check_origin(policy, "http://localhost:3001")


def test_origins_are_compared_in_one_spelling() -> None:
    assert normalize_origin("HTTPS://Example.COM:443/") == "https://example.com"
    assert normalize_origin("http://[::1]:7860") == "http://[::1]:7860"
    assert normalize_origin("null") == "null"


def test_only_the_api_needs_the_key() -> None:
    assert needs_key("/v1") and needs_key("/v1/chat/completions")
    assert not needs_key("/") and not needs_key("/v1x") and not needs_key("/gradio_api/queue/join")


def test_bearer_tokens() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer   abc ") == "abc"
    assert bearer_token("Basic abc") is None
    assert bearer_token("Bearer") is None
    assert bearer_token(None) is None


def test_the_key_must_be_sent_and_right() -> None:
    check_key("Bearer hearth-right-key", "hearth-right-key")
    with pytest.raises(KeyRefused) as missing:
        check_key(None, "hearth-right-key")
    assert missing.value.code == "missing_api_key" and "hearth api-key" in missing.value.remedy
    for wrong in ("Bearer hearth-wrong-key", "Bearer hearth-right-ke", "Bearer hearth-right-key2", "Bearer ké"):
        with pytest.raises(KeyRefused) as caught:
            check_key(wrong, "hearth-right-key")
        assert caught.value.code == "invalid_api_key"


def test_allowed_origins_are_empty_by_default_set_as_json_and_never_a_wildcard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.settings import load_settings
    from models.shared.errors import HearthError

    assert load_settings().server.allowed_origins == []
    monkeypatch.setenv("HEARTH_SERVER__ALLOWED_ORIGINS", '["http://localhost:3000"]')
    assert load_settings().server.allowed_origins == ["http://localhost:3000"]
    with pytest.raises(HearthError, match="any web page"):
        load_settings(server={"allowed_origins": ["*"]})
    with pytest.raises(HearthError, match="not an origin"):
        load_settings(server={"allowed_origins": ["null"]})
