"""Files sent with an API request: OpenAI's ``file`` content part and ``hearth.attachments``
are read by the reader process and embedded with MiniLM, given whole or searched, cited in the ``hearth`` field,
and never kept; bad files get a 400 that says why. A real server with the fake model."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backends.fake import FakeBackend
from tests.helpers import local_engines, write_pdf
from tests.integration.api_support import Served, serve_hearth, sse_events

pytestmark = pytest.mark.integration

NOTE = b"The boat Marigold is moored at pier 7. Its engine was serviced by Ewan Ross in March."


@pytest.fixture(scope="module")
def hearth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_hearth(tmp_path_factory.mktemp("files") / "home", make_engine=local_engines(FakeBackend)) as s:
        yield s


def data_url(data: bytes, mime: str = "text/plain") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def file_part(name: str, data: bytes, mime: str = "text/plain") -> dict[str, Any]:
    return {"type": "file", "file": {"filename": name, "file_data": data_url(data, mime)}}


def test_a_file_content_part_is_read_whole_and_cited(hearth: Served) -> None:
    question = {"type": "text", "text": "Who serviced the engine?"}
    reply = hearth.chat({"messages": [{"role": "user", "content": [question, file_part("boat.txt", NOTE)]}]})
    assert reply.status_code == 200, reply.text
    extension = reply.json()["hearth"]
    assert extension["attachments"] == [
        {"file": "boat.txt", "use": "whole", "passages": 0, "words": "boat.txt: whole file in context"}
    ]
    assert extension["sources"][0]["label"] == "boat.txt · whole file"
    assert "Ewan Ross" in extension["sources"][0]["text"]
    assert "collection" not in extension
    # Nothing of the file is kept: no conversation, no scratch copy.
    assert hearth.services.store.list() == []
    scratch = hearth.services.paths.api_files_dir
    assert not scratch.exists() or not any(scratch.rglob("*.txt"))


def test_a_long_file_in_the_hearth_field_is_searched(hearth: Served, tmp_path: Path) -> None:
    routine = "The harbour office keeps tide tables, mooring fees and the ferry timetable for visiting boats. "
    pages = [routine * 4 for _ in range(30)]
    pages[17] = "The harbour master is Isla Munro, reached on radio channel 14."
    pdf = write_pdf(tmp_path / "guide.pdf", pages).read_bytes()
    attachment = {"filename": "../../guide.pdf", "file_data": base64.b64encode(pdf).decode()}
    reply = hearth.chat(
        {
            "messages": [{"role": "user", "content": "Who is the harbour master?"}],
            "hearth": {"attachments": [attachment]},
            "stream": True,
        }
    )
    assert reply.status_code == 200, reply.text
    extension = sse_events(reply)[:-1][-1]["hearth"]  # the last chunk carries the hearth field
    (use,) = extension["attachments"]
    assert use["file"] == "guide.pdf" and use["use"] == "searched" and use["passages"] >= 1  # no folders in names
    assert extension["sources"][0]["label"] == "guide.pdf · page 18"


@pytest.mark.parametrize(
    ("part", "words"),
    [
        (file_part("photo.png", b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png"), ".png is not supported"),
        (file_part("empty.txt", b""), "empty"),
        (file_part("blob.txt", bytes(range(256)) * 16), "binary"),
        ({"type": "file", "file": {"filename": "x.txt", "file_data": "data:text/plain;base64,@@@"}}, "not base64"),
        ({"type": "file", "file": {"filename": "x.txt", "file_id": "file-abc"}}, "file_data"),
    ],
)
def test_a_bad_file_is_refused_with_the_reason(hearth: Served, part: dict[str, Any], words: str) -> None:
    reply = hearth.chat({"messages": [{"role": "user", "content": [{"type": "text", "text": "What is it?"}, part]}]})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert words in error["message"], error
    assert hearth.services.store.list() == []


def test_images_are_still_refused(hearth: Served) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    reply = hearth.chat({"messages": [{"role": "user", "content": [{"type": "text", "text": "What?"}, image]}]})
    assert reply.status_code == 400
    assert "not images or audio" in reply.json()["error"]["message"]
