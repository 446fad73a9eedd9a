"""Chunks on a real Chroma server (`chroma run` on loopback, started here) through the same calls as in the data
folder (rag/store.py ``VectorStore.on_server``, rag/chroma_server.py): the same answers as the embedded store, and
each way the server can fail — not running, stopped mid-use and started again, never answering, a proxy in front
that refuses the token, a certificate not trusted, TLS to a server without it — named with what to do."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rag.chroma_server import ChromaServerUnreachable, chroma_server
from rag.chunking import Chunk
from rag.store import VectorStore
from tests.chroma_servers import (
    ChromaProcess,
    TokenProxy,
    chroma_running,
    free_port,
    self_signed,
    silent_server,
    start_chroma,
)
from tests.integration.conftest import as_other

pytestmark = pytest.mark.integration

EMBEDDER = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaProcess]:
    with chroma_running(tmp_path_factory.mktemp("chroma") / "data") as running:
        yield running


def _chunks(path: str, count: int, seed: int) -> tuple[list[Chunk], np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chunks = [
        Chunk(f"{path}-{i}", f"passage {i} of {path}", i, i // 3 or None, f"Part {i % 2}" if i % 4 else None)
        for i in range(count)
    ]
    return chunks, vectors


def _token_file(folder: Path, name: str, token: str) -> Path:
    path = folder / name
    path.write_text(f"{token}\n")
    path.chmod(0o600)
    return path


def _fill(store: VectorStore, name: str) -> None:
    for seed, path in enumerate(("/docs/a.md", "/docs/b.pdf", "/docs/c.txt")):
        chunks, vectors = _chunks(path, 12, seed)
        store.replace_file(name, EMBEDDER, path, chunks, vectors)


def test_a_server_answers_every_call_as_the_data_folder_does(chroma: ChromaProcess, tmp_path: Path) -> None:
    here = VectorStore(tmp_path / "vectors")
    there = VectorStore.on_server(chroma_server(chroma.url))
    name = "kb-same-calls"
    for store in (here, there):
        _fill(store, name)
        store.replace_file(name, EMBEDDER, "/docs/b.pdf", *_chunks("/docs/b.pdf", 5, 9))  # a file indexed again
        store.remove_chunks(name, EMBEDDER, ["/docs/c.txt-0", "/docs/c.txt-1"])
    question = _chunks("/q", 1, 42)[1][0]
    for call in (
        lambda s: s.count(name, EMBEDDER),
        lambda s: s.chunks_of(name, EMBEDDER, "/docs/b.pdf"),
        lambda s: sorted(s.all_chunks(name, EMBEDDER), key=lambda c: c.id),
        lambda s: {path: sorted(ids) for path, ids in s.chunk_ids_by_path(name, EMBEDDER).items()},
        lambda s: [c.id for c in s.nearest(name, EMBEDDER, question, 6)],
        lambda s: s.exercise(name),
    ):
        assert call(there) == call(here)
    assert [round(score, 5) for _, score in there.nearest_scored(name, EMBEDDER, question, 3)] == [
        round(score, 5) for _, score in here.nearest_scored(name, EMBEDDER, question, 3)
    ]
    assert there.count(name, EMBEDDER) == 12 + 5 + 10
    session = there._client._server._session  # Chroma's own HTTP session: made without a timeout, given Hearth's
    assert session.timeout.read == 30.0 and session.timeout.connect == 30.0
    there.remove_file(name, EMBEDDER, "/docs/a.md")
    assert there.count(name, EMBEDDER) == 5 + 10
    assert name in there.store_names()
    there.drop(name)
    there.drop(name)  # already gone is fine, as in the folder
    assert name not in there.store_names()


def test_a_server_that_is_not_running_is_named_with_what_to_do() -> None:
    port = free_port()
    with pytest.raises(ChromaServerUnreachable) as refused:
        VectorStore.on_server(chroma_server(f"http://127.0.0.1:{port}"))
    assert f"http://127.0.0.1:{port} did not answer" in refused.value.message
    assert "chroma run" in refused.value.remedy and "data folder work meanwhile" in refused.value.remedy


def test_a_server_stopped_mid_use_is_named_and_everything_is_there_when_it_starts_again(tmp_path: Path) -> None:
    running = start_chroma(tmp_path / "data")
    try:
        store = VectorStore.on_server(chroma_server(running.url))
        _fill(store, "kb-restarted")
        running.stop()
        with pytest.raises(ChromaServerUnreachable) as gone:
            store.count("kb-restarted", EMBEDDER)
        assert running.url in gone.value.message and "did not answer" in gone.value.message
        running = start_chroma(tmp_path / "data", running.port)
        assert store.count("kb-restarted", EMBEDDER) == 36  # the same client, the server back
        assert len(store.nearest("kb-restarted", EMBEDDER, _chunks("/q", 1, 7)[1][0], 4)) == 4
    finally:
        running.stop()


def test_a_server_that_never_answers_is_given_up_on_after_the_timeout() -> None:
    with silent_server() as port:
        started = time.monotonic()
        with pytest.raises(ChromaServerUnreachable) as silent:
            from rag.chroma_server import server_client

            server_client(chroma_server(f"http://127.0.0.1:{port}"), timeout_s=1.0)
        waited = time.monotonic() - started
    assert "did not answer" in silent.value.message and f"127.0.0.1:{port}" in silent.value.message
    assert waited < 30  # not for ever: the client's own session has no timeout at all


def test_a_token_and_tls_through_a_proxy_in_front_of_the_server(chroma: ChromaProcess, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    token = _token_file(tmp_path, "token", "the-right-token")
    wrong = _token_file(tmp_path, "wrong", "another-token")
    proxy = TokenProxy(chroma.url, "the-right-token", cert, key)
    try:
        store = VectorStore.on_server(chroma_server(proxy.url, token_file=token, ca_file=cert))
        _fill(store, "kb-behind-a-proxy")
        assert store.count("kb-behind-a-proxy", EMBEDDER) == 36

        with pytest.raises(ChromaServerUnreachable) as refused:
            VectorStore.on_server(chroma_server(proxy.url, token_file=wrong, ca_file=cert))
        assert "refused Hearth's token" in refused.value.message and proxy.url in refused.value.message

        with pytest.raises(ChromaServerUnreachable) as untrusted:
            VectorStore.on_server(chroma_server(proxy.url, token_file=token))  # the system's authorities only
        assert "certificate that is not trusted" in untrusted.value.message
        assert "HEARTH_RAG__CHROMA_CA_FILE" in untrusted.value.remedy
    finally:
        proxy.close()
    with pytest.raises(ChromaServerUnreachable) as plain:
        VectorStore.on_server(chroma_server(chroma.url.replace("http://", "https://")))
    assert "TLS with the Chroma server" in plain.value.message and "http://" in plain.value.remedy


REACH = """
import ssl, sys, urllib.error, urllib.request
url = sys.argv[1]
context = ssl.create_default_context()
context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
try:
    print(urllib.request.urlopen(url + "/api/v2/heartbeat", timeout=20, context=context).status)
except urllib.error.HTTPError as refused:
    print(refused.code)
"""


def test_a_slow_server_is_waited_for_and_answers_as_a_fast_one(chroma: ChromaProcess, tmp_path: Path) -> None:
    """Each request takes a second more (a slow server, or a slow link): the calls wait for it, well within the
    30-second limit, and answer as without the delay."""
    cert, key = self_signed(tmp_path)
    token = _token_file(tmp_path, "token", "the-right-token")
    direct = VectorStore.on_server(chroma_server(chroma.url))
    _fill(direct, "kb-slow")
    proxy = TokenProxy(chroma.url, "the-right-token", cert, key, delay_s=1.0)
    try:
        slow = VectorStore.on_server(chroma_server(proxy.url, token_file=token, ca_file=cert))
        query = _chunks("/docs/a.md", 1, 0)[1][0]
        assert slow.count("kb-slow", EMBEDDER) == 36
        counted = proxy.forwarded
        assert counted > 0  # the calls went through the slow proxy, not around it
        assert slow.nearest("kb-slow", EMBEDDER, query, 3) == direct.nearest("kb-slow", EMBEDDER, query, 3)
        chunks, vectors = _chunks("/docs/d.md", 4, 7)
        slow.replace_file("kb-slow", EMBEDDER, "/docs/d.md", chunks, vectors)
        assert [c.text for c in direct.chunks_of("kb-slow", EMBEDDER, "/docs/d.md")] == [c.text for c in chunks]
        assert proxy.forwarded > counted  # the search and the write waited on it too
    finally:
        proxy.close()
        direct.drop("kb-slow")


def test_another_account_reads_chroma_run_itself_and_is_refused_by_the_proxy_in_front(
    chroma: ChromaProcess, tmp_path: Path, other_account: tuple[int, int]
) -> None:
    """What docs/chroma-server.md says: on 127.0.0.1 `chroma run` answers every account of this computer (it checks
    no one), and the proxy asking for a token refuses one that has none."""
    cert, key = self_signed(tmp_path)
    proxy = TokenProxy(chroma.url, "the-right-token", cert, key)
    try:
        direct = as_other(other_account, "/usr/bin/python3", "-c", REACH, chroma.url)
        through = as_other(other_account, "/usr/bin/python3", "-c", REACH, proxy.url)
    finally:
        proxy.close()
    assert direct.stdout.strip() == "200", direct.stderr
    assert through.stdout.strip() == "401", through.stderr


@pytest.mark.parametrize(
    ("how", "where"),
    [("huge", "/collections/"), ("endless", "/collections/"), ("trickle", "/collections/"), ("trickle", "/auth/")],
)
def test_a_server_that_answers_too_much_or_too_slowly_is_cut_off_with_memory_flat(
    chroma: ChromaProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, where: str
) -> None:
    """Behind a proxy that turns hostile once the store is in use (or, for "/auth/", as Chroma's client is made,
    right after the heartbeat): an answer that says it is 1.5 GB, one that never ends, and headers trickled a byte
    at a time. Each is cut (by the size cap or the request's deadline) and named; this process's memory stays within
    the cap's reach."""
    import os

    from rag import chroma_http
    from tests.helpers import MemoryGuard

    monkeypatch.setattr(chroma_http, "DEADLINE_S", 4.0)
    cert, key = self_signed(tmp_path)
    token = _token_file(tmp_path, "token", "the-right-token")
    proxy = TokenProxy(chroma.url, "the-right-token", cert, key)
    name = f"kb-hostile-{how}"
    try:
        if where == "/collections/":
            _fill(VectorStore.on_server(chroma_server(proxy.url, token_file=token, ca_file=cert)), name)
        proxy.hostile, proxy.hostile_path = how, where
        started = time.monotonic()
        with (
            MemoryGuard(os.getpid(), chroma_http.MAX_ANSWER_BYTES * 3) as guard,
            pytest.raises(ChromaServerUnreachable) as cut,
        ):
            VectorStore.on_server(chroma_server(proxy.url, token_file=token, ca_file=cert)).count(name, EMBEDDER)
        waited = time.monotonic() - started
    finally:
        proxy.hostile = ""
        proxy.close()
    assert not guard.killed
    said = cut.value.message
    assert proxy.url.removeprefix("https://") in said
    late, large = "no whole answer within 4 s" in said, "over the 256 MB Hearth reads" in said
    assert {"huge": large, "endless": large or late, "trickle": late}[how], said
    assert waited < 30
