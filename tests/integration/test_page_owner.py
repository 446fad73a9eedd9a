"""Only the owner can use the page: every page route wants this start's secret (a cookie the printed address is
exchanged for), another account on the computer gets nothing, and a page handler reads only files that were
uploaded through the page in this run. A real server (uvicorn, Gradio, the guard) with the fake model."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr
import httpx
import pytest

from app.ui.documents import DocumentsPanel
from app.ui.models_tab import ModelsPanel
from app.ui.page_uploads import PageUploads
from backends.fake import FakeBackend
from tests.helpers import local_engines, require
from tests.integration.api_support import Served, serve_hearth

pytestmark = pytest.mark.integration

SECRET_TEXT = "the owner's private words: plover-quince-7731"


@pytest.fixture(scope="module")
def hearth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_hearth(tmp_path_factory.mktemp("owner") / "home", make_engine=local_engines(FakeBackend)) as s:
        yield s


def page_routes() -> list[tuple[str, str, dict[str, Any]]]:
    join = {"data": [], "fn_index": 0, "session_hash": "s1", "event_data": None, "trigger_id": None}
    return [
        ("GET", "/", {}),
        ("GET", "/config", {}),
        ("GET", "/gradio_api/info", {}),
        ("GET", "/gradio_api/heartbeat/s1", {}),
        ("POST", "/gradio_api/queue/join", {"json": join}),
        ("GET", "/gradio_api/queue/data?session_hash=s1", {}),
        ("POST", "/gradio_api/run/reveal", {"json": {"data": []}}),
        ("POST", "/gradio_api/upload", {"files": {"files": ("a.txt", b"hello")}}),
        ("GET", "/gradio_api/file=/etc/hostname", {}),
        ("GET", "/theme.css", {}),
    ]


def test_without_the_secret_every_page_route_gives_nothing(hearth: Served) -> None:
    with hearth.client(key=None, owner=False) as stranger:
        for method, path, options in page_routes():
            reply = stranger.request(method, path, **options)
            assert reply.status_code == 401, (path, reply.status_code, reply.text[:200])
            assert hearth.key not in reply.text and '"components"' not in reply.text, path
            if path != "/":
                assert reply.json()["error"]["code"] == "page_secret_required", path
        plain = stranger.get("/")
        assert "hearth ui" in plain.text and "hearth open" in plain.text and "gradio" not in plain.text.lower()
        assert stranger.get("/", params={"token": "a-guess"}).status_code == 401
        wrong = stranger.get("/", headers={"Cookie": f"{hearth.server.gate.cookie_name}=a-guess"})  # type: ignore[union-attr]
        assert wrong.status_code == 401
        # The API keeps its own key, with or without the page secret.
        assert stranger.get("/v1/models", headers={"Authorization": f"Bearer {hearth.key}"}).status_code == 200


def test_the_printed_address_opens_the_page_and_leaves_the_address_bar(hearth: Served) -> None:
    gate = hearth.server.gate
    assert gate is not None and hearth.server.entry_url == f"{hearth.origin}/?token={gate.secret}"
    with httpx.Client(base_url=hearth.origin, timeout=60) as browser:
        entered = browser.get(hearth.server.entry_url)
        assert entered.status_code == 303 and entered.headers["location"] == "/"
        cookie = entered.headers["set-cookie"]
        assert cookie.startswith(f"hearth-page-{hearth.server.port}=") and "HttpOnly" in cookie
        page = browser.get("/")
        assert page.status_code == 200 and "gradio" in page.text.lower()
        assert browser.get("/config").status_code == 200
        # The owner's page shows the key; the same route gave a stranger nothing.
        revealed = browser.post("/gradio_api/run/reveal", json={"data": []})
        assert revealed.status_code == 200 and hearth.key in revealed.text


OTHER_CLIENT = """
import json, sys, urllib.error, urllib.request
base, routes = sys.argv[1], json.loads(sys.argv[2])
out = []
for method, path, body in routes:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            out.append([path, reply.status, reply.read().decode("utf-8", "replace")])
    except urllib.error.HTTPError as error:
        out.append([path, error.code, error.read().decode("utf-8", "replace")])
print(json.dumps(out))
"""


def test_a_process_of_another_account_gets_nothing(hearth: Served, other_account: tuple[int, int]) -> None:
    uid, gid = other_account
    routes = [
        ["GET", "/", None],
        ["GET", "/config", None],
        ["POST", "/gradio_api/run/reveal", {"data": []}],
        ["POST", "/gradio_api/queue/join", {"data": [], "fn_index": 0, "session_hash": "x"}],
        ["GET", "/gradio_api/file=/etc/hostname", None],
    ]
    # The system's Python: one under root's home (pyenv, the venv) is out of the other account's reach.
    python = "/usr/bin/python3"
    require(Path(python).exists(), "the system's python3", "apt-get install -y python3")
    run = subprocess.run(
        [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={gid}",
            "--clear-groups",
            python,
            "-c",
            OTHER_CLIENT,
            hearth.origin,
            json.dumps(routes),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr
    replies = json.loads(run.stdout)
    assert [status for _, status, _ in replies] == [401] * len(routes), replies
    assert all(hearth.key not in body for _, _, body in replies)
    # Nor can it read the secret or the key where Hearth keeps them.
    for kept in (hearth.services.paths.server_file, hearth.services.paths.api_key_file):
        peek = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "cat", str(kept)],
            capture_output=True,
            text=True,
        )
        assert peek.returncode != 0 and hearth.key not in peek.stdout


def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "owner-only.md"
    path.write_text(f"# Private\n\n{SECRET_TEXT}\n")
    path.chmod(0o600)
    return path


def event_of(config: dict[str, Any], elem_id: str, trigger: str) -> int:
    component = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == elem_id)
    return next(d["id"] for d in config["dependencies"] if [component, trigger] in [list(t) for t in d["targets"]])


def run_through_queue(client: httpx.Client, fn_index: int, data: list[Any]) -> dict[str, Any]:
    join = {"data": data, "fn_index": fn_index, "session_hash": "owner1", "event_data": None, "trigger_id": None}
    joined = client.post("/gradio_api/queue/join", json=join)
    assert joined.status_code == 200, joined.text
    with client.stream("GET", "/gradio_api/queue/data", params={"session_hash": "owner1"}) as stream:
        for line in stream.iter_lines():
            if line.startswith("data: ") and "process_completed" in line:
                return dict(json.loads(line.removeprefix("data: ")))
    raise AssertionError("the event never completed")


def test_a_server_path_sent_as_an_upload_is_refused_and_nothing_is_read(hearth: Served, tmp_path: Path) -> None:
    secret = secret_file(tmp_path)
    documents = hearth.services.documents.get()
    documents.ingestor.open_collection("owner-notes")
    forged = [{"path": str(secret), "orig_name": "notes.md", "meta": {"_type": "gradio.FileData"}}]
    with hearth.client(key=None) as owner:
        config = owner.get("/config").json()
        outcome = run_through_queue(owner, event_of(config, "upload", "upload"), ["owner-notes", forged])
        assert outcome["success"] is False, outcome
        assert SECRET_TEXT not in json.dumps(outcome)
        models = run_through_queue(owner, event_of(config, "import-model", "click"), ["", forged[0]])
        assert SECRET_TEXT not in json.dumps(models)
    assert documents.files("owner-notes") == []
    copies = [p for p in hearth.services.paths.page_files_dir.rglob("*") if p.is_file()]
    assert not any(SECRET_TEXT in p.read_text(errors="replace") for p in copies)
    assert not any(p.name == secret.name for p in hearth.services.paths.models_dir.rglob("*"))


def test_each_upload_taking_handler_refuses_a_path_that_was_never_uploaded(hearth: Served, tmp_path: Path) -> None:
    secret = secret_file(tmp_path)
    nothing_uploaded = PageUploads(lambda: set())
    documents = DocumentsPanel(hearth.services, nothing_uploaded)
    hearth.services.documents.get().ingestor.open_collection("direct")
    with pytest.raises(gr.Error) as refused:
        list(documents.add_files("direct", [str(secret)]))
    assert "upload box" in str(refused.value)
    assert hearth.services.documents.get().files("direct") == []

    models = ModelsPanel(hearth.services, nothing_uploaded)
    before = [row.stored.id for row in models._rows()]
    message, *_ = models.import_model("", str(secret))
    assert "did not come from this page's upload box" in message
    assert [row.stored.id for row in models._rows()] == before

    from app.ui.tuning_layout import FROM_FILE
    from app.ui.tuning_tab import TuningPanel

    tuning = TuningPanel(hearth.services, nothing_uploaded)
    fields = [8, 16, ["q_proj"], 0.001, 1, 0, 512, 1, False]
    checked = list(tuning.check(FROM_FILE, str(secret), [], None, "quick", *fields))
    assert "did not come from this page's upload box" in checked[-1][0]  # (check, measurement)
    measured = list(tuning.measure(FROM_FILE, str(secret), [], None, "quick", *fields))
    assert "did not come from this page's upload box" in measured[-1]
    started, *_ = tuning.start(FROM_FILE, str(secret), [], None, "secret-adapter", "quick", *fields)
    assert "did not come from this page's upload box" in started
    assert not hearth.services.paths.tuning_dir.exists() or not any(hearth.services.paths.tuning_dir.iterdir())
