"""A small server on loopback speaking the part of the Hugging Face Hub's HTTP API that ``huggingface_hub`` uses to
describe a repository and download a file: ``GET /api/models/OWNER/REPO`` (with each file's size and LFS SHA-256)
and ``GET /OWNER/REPO/resolve/REVISION/FILE`` (with HTTP Range). Tests point the real client at it through
``HF_ENDPOINT``; nothing leaves this machine.

Per file it can misbehave as a test asks: cut the connection after some bytes (a network that drops), send slowly,
serve bytes other than the listed SHA-256 (a damaged mirror), or keep a repository gated (401 without a token).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HostedFile:
    data: bytes
    listed_sha256: str = ""  # what the listing says; the bytes' own SHA-256 unless a test sets another
    cut_after: int | None = None  # close the connection after this many bytes of the file…
    cuts_left: int = 0  # …on this many downloads
    pace_s: float = 0.0  # a pause after each 4 KiB sent: a slow link, for a download to be stopped midway

    def __post_init__(self) -> None:
        self.listed_sha256 = self.listed_sha256 or hashlib.sha256(self.data).hexdigest()


@dataclass
class Repo:
    files: dict[str, HostedFile]
    gated_token: str | None = None  # the token that may read it, when gated
    downloads: int = 0  # the search lists the most downloaded first


@dataclass
class FakeHub:
    url: str
    repos: dict[str, Repo]
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, Range header)


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub

    def log_message(self, *_: object) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, head: bool) -> None:
        address = urlsplit(self.path)
        path = unquote(address.path)
        self.hub.requests.append((self.command, path, self.headers.get("Range", "")))
        if path == "/api/models":
            self._search(parse_qs(address.query))
            return
        info = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/[^/]+)?", path)
        if info:
            repo = self._repo(info.group(1))
            if repo is not None:
                self._listing(info.group(1), repo)
            return
        resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/[^/]+/(.+)", path)
        if not resolve:
            self._error(404, "RepoNotFound", "Not found")
            return
        repo = self._repo(resolve.group(1))
        if repo is None:
            return
        hosted = repo.files.get(resolve.group(2))
        if hosted is None:
            self._error(404, "EntryNotFound", "Entry not found")
            return
        self._file(hosted, head)

    def _repo(self, name: str) -> Repo | None:
        repo = self.hub.repos.get(name)
        if repo is None:
            self._error(401, "RepoNotFound", "Repository not found")
            return None
        if repo.gated_token is not None and self.headers.get("Authorization") != f"Bearer {repo.gated_token}":
            self._error(401, "GatedRepo", "Access to this model is restricted; you must be authenticated.")
            return None
        return repo

    def _search(self, query: dict[str, list[str]]) -> None:
        """The hub's model search: names containing the text, GGUF repositories only when asked, most downloaded
        first, at most ``limit``."""
        text = query.get("search", [""])[0].lower()
        limit = int(query.get("limit", ["1000"])[0])
        gguf_only = "gguf" in query.get("filter", [])
        found = [
            (name, repo)
            for name, repo in self.hub.repos.items()
            if text in name.lower() and (not gguf_only or any(f.endswith(".gguf") for f in repo.files))
        ]
        found.sort(key=lambda item: -item[1].downloads)
        listed = [{"id": name, "modelId": name, "downloads": repo.downloads, "tags": ["gguf"]} for name, repo in found]
        self._json(200, listed[:limit])

    def _listing(self, name: str, repo: Repo) -> None:
        siblings = [
            {
                "rfilename": filename,
                "size": len(hosted.data),
                "blobId": hashlib.sha1(hosted.data).hexdigest(),
                "lfs": {"sha256": hosted.listed_sha256, "size": len(hosted.data), "pointerSize": 135},
            }
            for filename, hosted in repo.files.items()
        ]
        self._json(200, {"id": name, "modelId": name, "sha": COMMIT, "siblings": siblings})

    def _file(self, hosted: HostedFile, head: bool) -> None:
        start = 0
        asked = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if asked:
            start = int(asked.group(1))
        data = hosted.data[start:]
        self.send_response(206 if asked else 200)
        if asked:
            self.send_header("Content-Range", f"bytes {start}-{len(hosted.data) - 1}/{len(hosted.data)}")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{hosted.listed_sha256}"')
        self.send_header("X-Repo-Commit", COMMIT)
        self.end_headers()
        if head:
            return
        if hosted.cuts_left > 0 and hosted.cut_after is not None:
            hosted.cuts_left -= 1
            self.wfile.write(data[: max(0, hosted.cut_after - start)])
            self.wfile.flush()
            self.close_connection = True
            return
        if not hosted.pace_s:
            self.wfile.write(data)
            return
        for start in range(0, len(data), 4096):
            self.wfile.write(data[start : start + 4096])
            self.wfile.flush()
            time.sleep(hosted.pace_s)

    def _error(self, status: int, code: str, message: str) -> None:
        self._json(status, {"error": message}, {"X-Error-Code": code, "X-Error-Message": message})

    def _json(self, status: int, value: object, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        for name, text in (headers or {}).items():
            self.send_header(name, text)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def hub_serving(repos: dict[str, Repo]) -> Iterator[FakeHub]:
    """The hub on 127.0.0.1 (a free port) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    hub = FakeHub(f"http://127.0.0.1:{server.server_address[1]}", repos)
    server.RequestHandlerClass = type("Handler", (_Handler,), {"hub": hub})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
