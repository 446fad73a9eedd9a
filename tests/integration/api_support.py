"""A real Hearth server in the test's process (uvicorn on a free loopback port, the page and the API), with the
fake backend: the model echoes the last user message word by word, so answers are known exactly."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from app.api.keys import ApiKeyStore
from app.api.server import RunningServer, start_server
from app.services.container import Services, build_services
from app.services.serving.runtime import EngineFactory, start_engine
from app.settings import load_settings
from app.ui.app import CSS, build_ui
from tests.helpers import free_port, make_inventory, write_tiny_gguf


@dataclass
class Served:
    services: Services
    server: RunningServer
    home: Path

    @property
    def key(self) -> str:
        return ApiKeyStore(self.services.paths.api_key_file).get()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    @property
    def page_cookies(self) -> dict[str, str]:
        """What the owner's browser holds after opening the printed address: the page secret's cookie."""
        gate = self.server.gate
        return {gate.cookie_name: gate.secret} if gate is not None else {}

    def client(self, key: str | None = "", owner: bool = True, **options: Any) -> httpx.Client:
        """A client for this server; ``key=""`` sends the real key, None sends none; ``owner`` sends the page
        secret's cookie (False: a client of another account, which cannot know it)."""
        headers = dict(options.pop("headers", {}))
        if key is not None:
            headers["Authorization"] = f"Bearer {key or self.key}"
        cookies = self.page_cookies if owner else {}
        options.setdefault("timeout", 60)
        return httpx.Client(base_url=self.origin, headers=headers, cookies=cookies, **options)

    def chat(self, body: dict[str, Any], **options: Any) -> httpx.Response:
        with self.client() as client:
            return client.post("/v1/chat/completions", json={"model": "hearth", **body}, **options)


@contextlib.contextmanager
def serve_hearth(
    home: Path, make_engine: EngineFactory = start_engine, load: bool = True, **overrides: Any
) -> Iterator[Served]:
    model = write_tiny_gguf(home.parent / f"{home.name}-tiny.gguf")
    sections: dict[str, Any] = {
        "model": {"path": model, "context_length": 512},
        "backend": {"name": "fake"},
        "server": {"port": free_port()},
    }
    for section, values in overrides.items():
        sections[section] = {**sections.get(section, {}), **values}
    settings = load_settings(home=home, **sections)
    services = build_services(settings, inventory=make_inventory(), make_engine=make_engine)
    try:
        if load:
            list(services.runtime.load(services.model_choice()))
        page = build_ui(services)
        page.queue(default_concurrency_limit=1)
        server = start_server(services, page, {"css": CSS, "footer_links": []})
        try:
            yield Served(services, server, home)
        finally:
            server.stop()
    finally:
        services.close()


def sse_events(response: httpx.Response) -> list[Any]:
    """The data of each event of a streamed reply, as the openai client splits them."""
    import json

    events: list[Any] = []
    for block in response.text.split("\n\n"):
        for line in block.splitlines():
            payload = line.removeprefix("data: ")
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events
