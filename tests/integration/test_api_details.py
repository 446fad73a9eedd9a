"""Bad input to the API gets the 400 or 404 the README promises, with a message of reasonable size: switching
to a path, a negative or absurd context, a backend named like a path; a huge model id; an unknown collection in
the ``hearth`` field; collection names that differ only in case; ``HEAD /v1/models``. A real server with the
fake model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from backends.fake import FakeBackend
from tests.helpers import local_engines
from tests.integration.api_support import Served, serve_hearth

pytestmark = pytest.mark.integration

HUGE_ID = "m" * (3 << 20)
MESSAGE_LIMIT = 600  # characters: enough to say what was wrong and what to do


@pytest.fixture(scope="module")
def hearth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_hearth(tmp_path_factory.mktemp("details") / "home", make_engine=local_engines(FakeBackend)) as s:
        yield s


def error_of(reply: Any) -> dict[str, Any]:
    error = reply.json()["error"]
    assert len(error["message"]) < MESSAGE_LIMIT, error["message"][:200]
    return dict(error)


@pytest.mark.parametrize(
    ("body", "status", "param_word"),
    [
        ({"model": "/etc/passwd"}, 404, "model"),
        ({"model": "../../x.gguf"}, 404, "model"),
        ({"model": HUGE_ID}, 404, "model"),
        ({"context_length": -5}, 400, "context"),
        ({"context_length": 10**12}, 400, "context"),
        ({"backend": "../../x"}, 400, "backend"),
        ({"device": "../../x"}, 400, "device"),
        ({"backend": "llamacpp", "device": "cuda:../1"}, 400, "device"),
    ],
)
def test_a_switch_to_something_impossible_is_refused_and_the_model_keeps_running(
    hearth: Served, body: dict[str, Any], status: int, param_word: str
) -> None:
    with hearth.client() as client:
        before = client.get("/v1/hearth/status").json()
        reply = client.post("/v1/hearth/switch", json=body)
        assert reply.status_code == status, reply.text[:300]
        error = error_of(reply)
        assert param_word in error["message"].lower()
        assert HUGE_ID[:1000] not in error["message"]
        after = client.get("/v1/hearth/status").json()
        assert after["state"] == "ready" and after["model"] == before["model"]


def test_a_huge_model_id_is_not_echoed_whole(hearth: Served) -> None:
    with hearth.client() as client:
        reply = client.post(
            "/v1/chat/completions", json={"model": HUGE_ID, "messages": [{"role": "user", "content": "hi"}]}
        )
        assert reply.status_code == 404
        message = error_of(reply)["message"]
        assert "mmmm" in message and f"{len(HUGE_ID):,} characters" in message


def test_an_unknown_collection_in_the_hearth_field_is_named_as_a_collection(hearth: Served) -> None:
    body = {
        "model": "hearth",
        "messages": [{"role": "user", "content": "hi"}],
        "hearth": {"collection": "no-such-shelf"},
    }
    with hearth.client() as client:
        reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 404
    error = error_of(reply)
    assert "collection 'no-such-shelf'" in error["message"] and "no model 'hearth'" not in error["message"]
    assert error["param"] == "hearth.collection"


def test_collection_ids_ignore_case_and_spacing(hearth: Served) -> None:
    ingestor = hearth.services.documents.get().ingestor
    first = ingestor.open_collection("Field Notes")
    again = ingestor.open_collection("field  notes ")
    assert again.name == first.name == "Field Notes"
    names = [info.name for info in hearth.services.documents.get().manifest.collections()]
    assert names.count("Field Notes") == 1 and not any(
        n.casefold() == "field notes" and n != "Field Notes" for n in names
    )
    with hearth.client() as client:
        listed = [m["id"] for m in client.get("/v1/models").json()["data"]]
        assert "hearth:Field Notes" in listed
        reply = client.post(
            "/v1/chat/completions",
            json={"model": "hearth:FIELD NOTES", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
        )
        assert reply.status_code == 200, reply.text[:300]


def test_head_of_the_model_list_answers_like_get(hearth: Served) -> None:
    with hearth.client() as client:
        head = client.head("/v1/models")
        get = client.get("/v1/models")
    assert head.status_code == get.status_code == 200
    assert head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]
