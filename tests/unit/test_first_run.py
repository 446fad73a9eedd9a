"""The note above the chat while the embedded model answers (app/ui/first_run.py)."""

from __future__ import annotations

from pathlib import Path

from app.ui.first_run import first_run
from models.catalog import CATALOG, RECOMMENDED_CHAT

RECOMMENDED = CATALOG[RECOMMENDED_CHAT]


def test_the_embedded_model_in_use_offers_the_recommended_one_with_its_size_and_the_offline_way(
    tmp_path: Path,
) -> None:
    embedded = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    embedded.write_bytes(b"GGUF")
    note = first_run(embedded, embedded, RECOMMENDED, installed_id=None)
    assert note is not None and note.install and note.use_id is None
    assert "small built-in model" in note.text and RECOMMENDED.title in note.text
    assert "1.0 GiB download" in note.text and "Apache-2.0" in note.text
    assert "Import a GGUF file" in note.text  # how to add one without a network


def test_an_installed_recommended_model_is_offered_for_use_and_any_other_model_needs_no_note(tmp_path: Path) -> None:
    embedded = tmp_path / "embedded.gguf"
    other = tmp_path / "other.gguf"
    for path in (embedded, other):
        path.write_bytes(b"GGUF")
    installed = first_run(embedded, embedded, RECOMMENDED, installed_id="qwen-1")
    assert installed is not None and not installed.install and installed.use_id == "qwen-1"
    assert "is installed" in installed.text
    assert first_run(other, embedded, RECOMMENDED, installed_id=None) is None
    assert first_run(None, embedded, RECOMMENDED, installed_id=None) is None


def test_a_larger_hub_model_that_fits_is_named_as_the_step_after(tmp_path: Path) -> None:
    from models.hub_catalog import HUB_CATALOG

    embedded = tmp_path / "embedded.gguf"
    embedded.write_bytes(b"GGUF")
    larger = HUB_CATALOG["qwen3-4b-2507"]
    for installed_id in (None, "qwen-1"):
        note = first_run(embedded, embedded, RECOMMENDED, installed_id, larger)
        assert note is not None
        assert "room for **Qwen3-4B-Instruct-2507** (2.3 GiB)" in note.text
        assert "Install a current model from the Hugging Face Hub" in note.text
    plain = first_run(embedded, embedded, RECOMMENDED, None)
    assert plain is not None and "Hugging Face" not in plain.text
