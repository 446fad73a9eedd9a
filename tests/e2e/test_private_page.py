"""The page in a real browser: what it writes is private to the user, its import by path answers the same for any
path that is not a GGUF model (it is no way to explore the computer), and a model llama.cpp cannot load is listed
as such."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import RunningApp
from tests.e2e.test_documents_page import CORPUS, create_collection, open_documents, upload
from tests.gguf_files import write_model
from tests.integration.test_cli_hardening import assert_private

pytestmark = pytest.mark.e2e


def import_by_path(page: Any, typed: str) -> None:
    page.locator("#import-path textarea, #import-path input").first.fill(typed)
    page.click("#import-model")


def import_answer(page: Any, typed: str) -> str:
    """The message the page shows beside the Import button for a typed path. An empty import comes first, so
    that the answer is seen to change even when two paths get the same one."""
    message = page.locator("#import-message")
    import_by_path(page, "")
    message.filter(has_text="Type the path").wait_for(timeout=30_000)
    import_by_path(page, typed)
    page.wait_for_function(
        "() => !document.querySelector('#import-message').innerText.includes('Type the path')", timeout=30_000
    )
    return str(message.inner_text()).strip()


def test_private_files_and_an_import_that_reveals_nothing_of_other_paths(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], tmp_path: Path
) -> None:
    (tmp_path / "folder.gguf").mkdir()
    (tmp_path / "diary.gguf").write_text("private words, not a model")
    (tmp_path / "diary.txt").write_text("private words")
    os.mkfifo(tmp_path / "pipe.gguf")
    unknown = write_model(tmp_path / "foo-model.gguf", architecture="foo")
    app = start_app()
    page = open_page(app)

    open_documents(page)
    create_collection(page, "Private notes")
    upload(page, [CORPUS / "garden-guide.txt"], expect="Added 1 file")

    page.get_by_role("tab", name="Models").click()
    page.locator("#models-table [role=gridcell]", has_text="SmolLM2-135M-Instruct").first.wait_for(timeout=30_000)
    page.click("#import-accordion button")
    probes = ["missing.gguf", "folder.gguf", "diary.gguf", "diary.txt", "pipe.gguf", "no/such/folder.gguf"]
    answers = []
    for name in probes:
        answers.append(import_answer(page, str(tmp_path / name)))
    assert len(set(answers)) == 1, answers
    assert "cannot import that path" in answers[0] and "diary" not in answers[0]

    import_by_path(page, str(unknown))
    verdict = "cannot run here: llama.cpp in this Hearth does not know the architecture 'foo'"
    page.locator("#models-table [role=gridcell]", has_text=verdict).first.wait_for(timeout=30_000)

    modes = assert_private(app.home)
    assert modes["documents"] == 0o700
    copies = [name for name in modes if name.startswith("documents/") and name.endswith("garden-guide.txt")]
    assert copies and all(modes[name] == 0o600 for name in copies)
    assert modes["conversations.db"] == 0o600 and modes["vectors/chroma.sqlite3"] == 0o600
    assert app.remote_requests == []
