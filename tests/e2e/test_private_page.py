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


def shown_error(page: Any) -> str:
    """The text of the error the last action showed; the error is then closed."""
    toast = page.locator("[data-testid='toast-body']").first
    toast.wait_for(timeout=30_000)
    text = str(toast.locator("[data-testid='toast-text']").inner_text()).strip()
    toast.locator("[data-testid='toast-close']").click()
    toast.wait_for(state="detached", timeout=10_000)
    return text


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
        import_by_path(page, str(tmp_path / name))
        answers.append(shown_error(page))
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
