"""Errors speak of the page's controls on the page and of commands on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import HearthError
from app.ui.errors import as_gradio_error
from app.ui.models_view import page_message
from models.quantize import AlreadyQuantized
from rag.manifest import Manifest


def test_the_page_says_the_page_remedy_and_the_terminal_keeps_the_command() -> None:
    error = HearthError("It is known.", "Run `hearth models default abc`.", page_remedy="Pick it in the Model list.")
    assert error.for_page == "It is known. Pick it in the Model list."
    assert str(error) == "It is known. Run `hearth models default abc`."
    assert "Model list" in str(as_gradio_error(error)) and "hearth" not in page_message(error)
    plain = HearthError("Something.", "Do this.")
    assert plain.for_page == "Something. Do this." == page_message(plain)


def test_a_class_wide_page_remedy_still_applies() -> None:
    refused = AlreadyQuantized("It is quantized.", "Pass --allow-requantize.")
    assert "Allow re-quantizing" in page_message(refused) and "--" not in page_message(refused)


def test_an_unknown_collection_points_at_the_documents_tab(tmp_path: Path) -> None:
    manifest = Manifest(tmp_path / "index.db")
    try:
        with pytest.raises(HearthError) as missing:
            manifest.get("nowhere")
    finally:
        manifest.close()
    assert "hearth ingest" in missing.value.remedy
    assert "Documents tab" in missing.value.for_page and "hearth" not in missing.value.for_page
