"""The Chroma server's address, token file and certificate file, checked before anything is sent
(rag/chroma_server.py): what is taken, and what is refused with the reason and what to do."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest

from rag.chroma_server import (
    ChromaServer,
    ChromaServerSettingError,
    ChromaServerUnreachable,
    chroma_server,
    read_token,
    unreachable,
)


def _token(tmp_path: Path, text: str = "s3cret\n", mode: int = 0o600) -> Path:
    path = tmp_path / "token"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("url", "host", "port", "tls", "shown"),
    [
        ("http://127.0.0.1:8000", "127.0.0.1", 8000, False, "http://127.0.0.1:8000"),
        ("http://chroma.lan", "chroma.lan", 8000, False, "http://chroma.lan:8000"),  # `chroma run`'s own port
        ("https://chroma.example.org/", "chroma.example.org", 443, True, "https://chroma.example.org:443"),
        (" HTTPS://[::1]:9443 ", "::1", 9443, True, "https://[::1]:9443"),
    ],
)
def test_an_address_gives_its_host_port_and_scheme(url: str, host: str, port: int, tls: bool, shown: str) -> None:
    server = chroma_server(url)
    assert (server.host, server.port, server.tls, server.shown) == (host, port, tls, shown)


@pytest.mark.parametrize(
    ("url", "said", "remedy"),
    [
        ("127.0.0.1:8000", "is not a Chroma server's address", "http://HOST:PORT"),
        ("ftp://host:21", "is not a Chroma server's address", "leave it unset"),
        ("http://", "is not a Chroma server's address", "http://HOST:PORT"),
        ("http://me:pw@host:8000", "user name or password", "HEARTH_RAG__CHROMA_TOKEN_FILE"),
        ("http://host:8000/api/v2", "has a path or query", "scheme, host and port"),
        ("http://host:8000/?tenant=x", "has a path or query", "scheme, host and port"),
        ("http://host:99999", "port that is not a number", "http://HOST:PORT"),
    ],
)
def test_an_address_that_cannot_be_used_is_refused_with_what_to_do(url: str, said: str, remedy: str) -> None:
    with pytest.raises(ChromaServerSettingError) as refused:
        chroma_server(url)
    assert said in refused.value.message and remedy in refused.value.remedy


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    for mode in (0o644, 0o640, 0o604, 0o660):
        with pytest.raises(ChromaServerSettingError) as refused:
            chroma_server("https://host", token_file=_token(tmp_path, mode=mode))
        assert "other accounts" in refused.value.message and "chmod 600" in refused.value.remedy
    assert chroma_server("https://host", token_file=_token(tmp_path)).token_file == tmp_path / "token"


def test_a_missing_or_odd_token_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ChromaServerSettingError, match="Cannot read the Chroma token file"):
        chroma_server("https://host", token_file=tmp_path / "nowhere")
    (tmp_path / "folder").mkdir(mode=0o700)
    with pytest.raises(ChromaServerSettingError, match="is not a file"):
        chroma_server("https://host", token_file=tmp_path / "folder")
    for text in ("", "  \n", "one\ntwo\n"):
        server = chroma_server("https://host", token_file=_token(tmp_path, text))
        with pytest.raises(ChromaServerSettingError, match="empty or holds more than one line"):
            read_token(server)
    assert read_token(chroma_server("https://host", token_file=_token(tmp_path, " tok \n"))) == "tok"
    assert read_token(chroma_server("https://host")) is None


def test_a_token_crosses_the_network_only_over_tls(tmp_path: Path) -> None:
    token = _token(tmp_path)
    with pytest.raises(ChromaServerSettingError) as refused:
        chroma_server("http://192.168.1.20:8000", token_file=token)
    assert "unencrypted" in refused.value.message and "https://" in refused.value.remedy
    for here in ("http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000", "http://127.8.9.1:1"):
        assert chroma_server(here, token_file=token).token_file == token  # never leaves this computer
    assert chroma_server("https://192.168.1.20", token_file=token).tls


def test_a_missing_certificate_authority_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ChromaServerSettingError) as refused:
        chroma_server("https://host", ca_file=tmp_path / "ca.pem")
    assert "ca.pem" in refused.value.message and "HEARTH_RAG__CHROMA_CA_FILE" in refused.value.remedy


SERVER = ChromaServer("https://h:1", "h", 1, True)


def _raised_from(cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise ValueError("Could not connect to a Chroma server. Are you sure it is running?") from inner
    except ValueError as outer:
        return outer


def test_each_transport_failure_says_what_went_wrong() -> None:
    request = httpx.Request("GET", "https://h:1/api/v2/heartbeat")
    cases: list[tuple[BaseException, str, str]] = [
        (httpx.ConnectError("[Errno 111] Connection refused"), "did not answer (", "chroma run"),
        (httpx.ReadTimeout("timed out"), "did not answer (timed out)", "HEARTH_RAG__CHROMA_URL"),
        (ssl.SSLCertVerificationError("self-signed certificate"), "not trusted", "HEARTH_RAG__CHROMA_CA_FILE"),
        (ssl.SSLError("wrong version number"), "TLS with the Chroma server", "http:// for `chroma run`"),
        (
            httpx.HTTPStatusError("401", request=request, response=httpx.Response(401, request=request)),
            "refused Hearth's token",
            "HEARTH_RAG__CHROMA_TOKEN_FILE",
        ),
    ]
    for cause, said, remedy in cases:
        told = unreachable(SERVER, _raised_from(cause))
        assert isinstance(told, ChromaServerUnreachable)
        assert "https://h:1" in told.message and said in told.message, told.message
        assert remedy in told.remedy, told.remedy
