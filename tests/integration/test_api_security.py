"""Host, Origin and key rules on a real server, for the page (Gradio's own routes, its queue) and the API alike.
A web page open in the user's browser must not be able to drive the chat or call the API (DNS rebinding and
cross-site requests: Ollama's CVE-2024-28224)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api.keys import ApiKeyStore
from backends.fake import FakeBackend
from tests.helpers import local_engines
from tests.integration.api_support import Served, serve_hearth

pytestmark = pytest.mark.integration

EVIL = "http://evil.example"


@pytest.fixture(scope="module")
def hearth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_hearth(tmp_path_factory.mktemp("security") / "home", make_engine=local_engines(FakeBackend)) as s:
        yield s


def page_requests(hearth: Served) -> list[tuple[str, str, dict[str, Any]]]:
    """The page's own routes: the page, its config, its queue (join and the event stream), and the API."""
    join = {"data": [], "fn_index": 0, "session_hash": "s1", "event_data": None, "trigger_id": None}
    return [
        ("GET", "/", {}),
        ("GET", "/config", {}),
        ("GET", "/gradio_api/info", {}),
        ("POST", "/gradio_api/queue/join", {"json": join}),
        ("GET", "/gradio_api/queue/data?session_hash=s1", {}),
        ("POST", "/gradio_api/upload", {"files": {"files": ("a.txt", b"hello")}}),
        ("GET", "/v1/models", {"headers": {"Authorization": f"Bearer {hearth.key}"}}),
    ]


def refused(reply: httpx.Response, code: str) -> None:
    assert reply.status_code == 403, (reply.request.url, reply.status_code, reply.text[:200])
    assert reply.json()["error"]["code"] == code


def test_a_foreign_host_is_refused_on_every_route(hearth: Served) -> None:
    # DNS rebinding: evil.example resolves to 127.0.0.1, but the browser still names it in the Host header.
    with hearth.client(key=None) as client:
        for method, path, options in page_requests(hearth):
            headers = {"Host": f"evil.example:{hearth.server.port}", **options.pop("headers", {})}
            refused(client.request(method, path, headers=headers, **options), "host_not_allowed")


def test_a_foreign_origin_is_refused_on_every_route(hearth: Served) -> None:
    with hearth.client(key=None) as client:
        for method, path, options in page_requests(hearth):
            headers = {"Origin": EVIL, **options.pop("headers", {})}
            refused(client.request(method, path, headers=headers, **options), "origin_not_allowed")
        refused(client.get("/config", headers={"Origin": "null"}), "origin_not_allowed")


def component_id(config: dict[str, Any], elem_id: str) -> int:
    return next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == elem_id)


def run_event(client: httpx.Client, config: dict[str, Any], output_elem_id: str, origin: str) -> Any:
    """Trigger the page's event that fills ``output_elem_id`` through Gradio's queue, as the browser does."""
    target = component_id(config, output_elem_id)
    dependency = next(d for d in config["dependencies"] if target in d["outputs"])
    join = {"data": [], "fn_index": dependency["id"], "session_hash": "page1", "event_data": None, "trigger_id": None}
    joined = client.post("/gradio_api/queue/join", json=join, headers={"Origin": origin})
    assert joined.status_code == 200, joined.text
    import json

    with client.stream("GET", "/gradio_api/queue/data", params={"session_hash": "page1"}) as stream:
        for line in stream.iter_lines():
            if line.startswith("data: ") and "process_completed" in line:
                message = json.loads(line.removeprefix("data: "))
                assert message["success"], message
                return message["output"]["data"]
    raise AssertionError("the event never completed")


def test_the_page_and_its_queue_work_from_its_own_origin(hearth: Served) -> None:
    for origin in (hearth.origin, f"http://localhost:{hearth.server.port}"):
        with hearth.client(key=None, headers={"Origin": origin}) as client:
            assert client.get("/").status_code == 200
            config = client.get("/config").json()
            # The Hardware tab's API section, filled through the queue: the address as this browser reached it.
            address, example = run_event(client, config, "api-address", origin)
            assert f"{hearth.origin}/v1" in address
            assert "OpenAI(" in example and "PASTE-THE-KEY" in example
            key_box, example = run_event(client, config, "api-key", origin)
            assert key_box["value"] == hearth.key and hearth.key in example


def test_the_api_needs_the_right_key_and_a_rotation_takes_effect_at_once(hearth: Served) -> None:
    with hearth.client(key=None) as anonymous:
        missing = anonymous.get("/v1/models")
        assert missing.status_code == 401 and missing.json()["error"]["code"] == "missing_api_key"
        assert missing.headers["WWW-Authenticate"].startswith("Bearer")
        basic = anonymous.get("/v1/models", headers={"Authorization": "Basic dXNlcjpwYXNz"})
        assert basic.status_code == 401
        # The key is checked before the body is read: a stranger learns nothing about requests.
        assert anonymous.post("/v1/chat/completions", content=b"{broken").status_code == 401
    with hearth.client(key="hearth-not-the-key-at-all-0000000000") as wrong:
        assert wrong.get("/v1/models").json()["error"]["code"] == "invalid_api_key"
    old = hearth.key
    new = ApiKeyStore(hearth.services.paths.api_key_file).rotate()  # `hearth api-key --rotate`, elsewhere
    with hearth.client(key=old) as client:
        assert client.get("/v1/models").status_code == 401
    with hearth.client(key=new) as client:
        assert client.get("/v1/models").status_code == 200


def test_a_listed_origin_may_call_the_api_from_a_browser(tmp_path: Path) -> None:
    listed = "http://localhost:3000"
    with serve_hearth(
        tmp_path / "home", make_engine=local_engines(FakeBackend), server={"allowed_origins": [listed]}
    ) as hearth:
        with hearth.client(key=None) as client:
            preflight = client.options(
                "/v1/chat/completions",
                headers={
                    "Origin": listed,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization, content-type, x-stainless-os",
                },
            )
            assert preflight.status_code == 204
            assert preflight.headers["access-control-allow-origin"] == listed
            assert "x-stainless-os" in preflight.headers["access-control-allow-headers"]
            refused(client.options("/v1/models", headers={"Origin": EVIL}), "origin_not_allowed")
        with hearth.client(headers={"Origin": listed}) as client:
            reply = client.get("/v1/models")
            assert reply.status_code == 200 and reply.headers["access-control-allow-origin"] == listed
        with hearth.client(headers={"Origin": EVIL}) as client:
            refused(client.get("/v1/models"), "origin_not_allowed")


def test_beyond_loopback_the_page_needs_the_key_too(tmp_path: Path) -> None:
    exposed = serve_hearth(tmp_path / "home", make_engine=local_engines(FakeBackend), server={"host": "0.0.0.0"})
    with exposed as hearth, hearth.client(key=None) as client:
        assert client.get("/config").status_code == 401
        wrong = client.post("/login", data={"username": "me", "password": "guess"})
        assert wrong.status_code == 400
        assert client.get("/config").status_code == 401
        right = client.post("/login", data={"username": "me", "password": hearth.key})
        assert right.status_code == 200
        assert client.get("/config").status_code == 200
        refused(client.get("/config", headers={"Host": f"evil.example:{hearth.server.port}"}), "host_not_allowed")
