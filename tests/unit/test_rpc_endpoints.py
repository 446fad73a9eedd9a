"""Worker addresses: HOST:PORT, HOST alone (the default port), [IPv6]:PORT; what counts as loopback."""

from __future__ import annotations

import pytest

from backends.workers.rpc import DEFAULT_PORT, BadEndpoint, Endpoint, parse_endpoint


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:50052", Endpoint("127.0.0.1", 50052)),
        (" gpu-box.local:6000 ", Endpoint("gpu-box.local", 6000)),
        ("127.0.0.1", Endpoint("127.0.0.1", DEFAULT_PORT)),
        ("[::1]:7000", Endpoint("::1", 7000)),
        ("[::1]", Endpoint("::1", DEFAULT_PORT)),
    ],
)
def test_addresses_are_read(text: str, expected: Endpoint) -> None:
    assert parse_endpoint(text) == expected


@pytest.mark.parametrize("text", [":50052", "host:0", "host:70000", "host:port", "[]:1", ""])
def test_bad_addresses_say_how_to_write_one(text: str) -> None:
    with pytest.raises(BadEndpoint) as refused:
        parse_endpoint(text)
    assert "HOST:PORT" in refused.value.remedy


def test_loopback_and_the_text_llama_cpp_reads() -> None:
    assert Endpoint("127.0.0.1", 1).loopback and Endpoint("::1", 1).loopback and Endpoint("localhost", 1).loopback
    assert not Endpoint("0.0.0.0", 1).loopback and not Endpoint("192.168.1.5", 1).loopback
    assert not Endpoint("gpu-box.local", 1).loopback
    assert str(Endpoint("::1", 7000)) == "[::1]:7000" and str(Endpoint("127.0.0.1", 7000)) == "127.0.0.1:7000"
