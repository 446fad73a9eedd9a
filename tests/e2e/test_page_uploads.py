"""Uploads to a real `hearth ui`: bounded by the documents' size limit (in the page, before anything is sent, and on
the server for any other client), and only from the page itself: a foreign web page, a foreign Host name, or a
stranger without the key when Hearth is exposed, gets nothing into Gradio's temporary folder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import RunningApp
from tests.e2e.test_documents_page import create_collection, open_documents, upload

pytestmark = pytest.mark.e2e

LIMIT_MB = 1
BOUNDARY = "hearth-test-boundary"
CHUNK = b"x" * (1 << 20)


@pytest.fixture
def upload_folder(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Gradio's temporary folders for the apps the test starts (inside the data folder), and a small document
    limit."""
    monkeypatch.setenv("HEARTH_RAG__MAX_FILE_MB", str(LIMIT_MB))
    return isolated_home / "page-files"


def kept_files(folder: Path) -> dict[str, int]:
    return {str(path.relative_to(folder)): path.stat().st_size for path in folder.rglob("*") if path.is_file()}


def streamed_upload(name: str, megabytes: int, sent: list[int]) -> Iterator[bytes]:
    """A multipart body of ``megabytes`` MiB made as it is sent: the test never holds it in memory."""
    yield (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    for _ in range(megabytes):
        sent[0] += len(CHUNK)
        yield CHUNK
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


def test_a_file_over_the_limit_is_refused_in_the_page_with_the_limit_and_the_way_to_raise_it(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], upload_folder: Path, tmp_path: Path
) -> None:
    app = start_app("--backend", "fake")
    page = open_page(app)
    open_documents(page)
    create_collection(page, "limits")
    note = page.locator("#upload-limit")
    assert f"{LIMIT_MB} MB" in note.inner_text() and "HEARTH_" not in note.inner_text()  # the setting is folded
    note.locator("summary", has_text="Details").click()
    expect(note).to_contain_text("HEARTH_RAG__MAX_FILE_MB")
    big = tmp_path / "too-big.txt"
    with big.open("wb") as handle:
        handle.truncate((LIMIT_MB << 20) + 1)
    page.set_input_files("#upload input[type=file]", str(big))
    toast = page.get_by_text(f"exceed the maximum allowed size of {LIMIT_MB}.0 Mb").first
    toast.wait_for(timeout=15_000)
    assert "too-big.txt" in toast.inner_text()
    # Files under the limit still go through.
    small = tmp_path / "small-notes.md"
    small.write_text("# Notes\n\nThe lighthouse was built in 1852.\n")
    assert "Added 1 file" in upload(page, [small], expect="Added 1 file")
    assert all(size <= LIMIT_MB << 20 for size in kept_files(upload_folder).values())
    assert not any("too-big" in name for name in kept_files(upload_folder))
    assert app.csp_violations == [] and app.remote_requests == []


def test_the_upload_route_refuses_a_300_mb_body_and_keeps_nothing(
    start_app: Callable[..., RunningApp], upload_folder: Path
) -> None:
    app = start_app("--backend", "fake")
    sent = [0]
    reply = httpx.post(
        f"{app.url}gradio_api/upload",
        cookies=app.cookies,
        content=streamed_upload("huge.txt", 300, sent),
        headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
        timeout=120,
    )
    assert reply.status_code == 413
    assert f"maximum allowed size of {LIMIT_MB << 20} bytes" in reply.text
    assert sent[0] == 300 << 20  # the body was really that large
    assert kept_files(upload_folder) == {}


def test_uploads_from_a_foreign_page_or_host_are_refused(
    start_app: Callable[..., RunningApp], upload_folder: Path
) -> None:
    app = start_app("--backend", "fake")
    port = app.url.rstrip("/").rsplit(":", 1)[1]
    route = f"{app.url}gradio_api/upload"
    files = {"files": ("a.txt", b"hello")}
    for headers, code in (
        ({"Origin": "http://evil.example"}, "origin_not_allowed"),
        ({"Origin": "null"}, "origin_not_allowed"),
        ({"Host": f"evil.example:{port}"}, "host_not_allowed"),  # DNS rebinding
    ):
        reply = httpx.post(route, files=files, headers=headers)
        assert reply.status_code == 403 and reply.json()["error"]["code"] == code, reply.text
    assert kept_files(upload_folder) == {}
    # The page's own origin may upload.
    own = httpx.post(route, files=files, headers={"Origin": app.url.rstrip("/")}, cookies=app.cookies)
    assert own.status_code == 200 and len(own.json()) == 1


def test_an_exposed_hearth_takes_uploads_only_after_login(
    start_app: Callable[..., RunningApp], browser_session: Any, upload_folder: Path
) -> None:
    app = start_app("--backend", "fake", "--host", "0.0.0.0")
    route = f"{app.url}gradio_api/upload"
    files = {"files": ("a.txt", b"hello")}
    assert httpx.post(route, files=files).status_code == 401
    assert kept_files(upload_folder) == {}
    key = (app.home / "api-key").read_text().strip()
    with httpx.Client(base_url=app.url) as client:
        assert client.post("/login", data={"username": "me", "password": key}).status_code == 200
        assert client.post("/gradio_api/upload", files=files).status_code == 200
    # The login page works under the page's policy too.
    context = browser_session.new_context()
    try:
        page = context.new_page()
        refused: list[str] = []
        page.on("console", lambda message: refused.append(message.text) if "Security Policy" in message.text else None)
        page.goto(app.url)
        page.locator("input[type=password]").fill(key)
        page.locator("input").first.fill("me")
        page.get_by_role("button", name="Login").click()
        page.wait_for_selector("#message textarea", timeout=30_000)
        assert refused == []
    finally:
        context.close()
