"""Reading a collection's passages ahead (a collection warmed after indexing), on the real engine
process with the embedded model, MiniLM and Chroma: each passage of the files just indexed is read once and its
cache kept, so the very first question that finds one joins it; read ahead again, every passage is found kept; from
the terminal (`hearth ingest --read-ahead`) with progress, and refused before anything is indexed where nothing
would be kept (keeping passages off)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.services.answering.turn_settings import TurnSettings
from app.services.answering.warming import passages_of, planned, room_tokens, warm
from app.services.container import Services, build_services
from app.settings import Settings, load_settings
from backends.base import CancelToken, GenerationParams, Usage
from tests.helpers import run_hearth

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
ASKED = "Who designed the Skerry lighthouse?"


def settings_for(home: Path, read_ahead: bool = False) -> Settings:
    return load_settings(
        home=home,
        model={"context_length": 2048},
        backend={"name": "llamacpp", "slots": 1, "conversation_cache_mb": 0},
        rag={"read_ahead": read_ahead},
    )


def read_ahead(services: Services, settings: Settings) -> list[tuple[int, int, int]]:
    assert services.runtime.model is not None
    passages = passages_of(services.documents.get(), "Coast notes", [str(CORPUS / "lighthouse-history.md")])
    plan = planned(services.runtime, passages, room_tokens(services.runtime.model, settings))
    assert plan == passages  # a small file: all of it fits
    steps = warm(services.runtime, plan, services.generation_params(collection="Coast notes"), CancelToken())
    return [(step.done, step.total, step.kept_before) for step in steps]


def test_passages_read_ahead_are_joined_by_the_first_question_that_finds_them(
    tmp_path: Path, embedded_model: Path, llama_cpp_installed: None
) -> None:
    settings = settings_for(tmp_path / "home")
    services = build_services(settings)
    try:
        list(services.control.start())
        documents = services.documents.get()
        list(documents.ingestor.ingest([CORPUS / "lighthouse-history.md", CORPUS / "sourdough.html"], "Coast notes"))
        steps = read_ahead(services, settings)
        again = read_ahead(services, settings)
        turn = TurnSettings(GenerationParams(temperature=0.0, max_new_tokens=4), "", collection="Coast notes")
        first = next(e for e in services.chat.send(None, ASKED, turn) if isinstance(e, Usage))
    finally:
        services.close()
    total = steps[-1][1]
    assert total > 0 and steps == [(n, total, 0) for n in range(total + 1)]  # each read once, none kept before
    assert again[-1] == (total, total, total)  # every passage found kept: joined, not read again
    assert first.joined_tokens > 0  # the first question: nothing asked before, and still joined
    assert any((tmp_path / "home" / "cache" / "passages").rglob("*.kv"))


def test_the_terminal_reads_ahead_after_indexing_and_refuses_where_nothing_would_be_kept(
    embedded_model: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEARTH_RAG__KEEP_PASSAGES", "false")
    refused = run_hearth(isolated_home, "ingest", str(CORPUS / "lighthouse-history.md"), "-c", "Coast", "--read-ahead")
    assert refused.returncode != 0
    assert "HEARTH_RAG__KEEP_PASSAGES=true" in refused.stderr and "Adding to collection" not in refused.stderr
    assert "Coast" not in run_hearth(isolated_home, "collections").stdout  # refused before anything was indexed

    monkeypatch.delenv("HEARTH_RAG__KEEP_PASSAGES")  # the defaults: passages kept, four slots
    ran = run_hearth(isolated_home, "ingest", str(CORPUS / "lighthouse-history.md"), "-c", "Coast", "--read-ahead")
    assert ran.returncode == 0, ran.stderr[-3000:]
    lines = [line for line in ran.stderr.splitlines() if line.startswith("Reading ahead: ")]
    assert lines[0].startswith("Reading ahead: 0 of ") and "estimating" in lines[0]
    total = lines[0].split(" of ")[1].split()[0]
    assert lines[-1].startswith(f"Reading ahead: {total} of {total} passage") and int(total) > 0
    assert f"Read {total} passage" in ran.stderr
    assert any((isolated_home / "cache" / "passages").rglob("*.kv"))


def test_the_page_reads_new_files_ahead_when_asked_and_not_on_battery(
    tmp_path: Path, embedded_model: Path, llama_cpp_installed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from app.services.answering import warming
    from app.ui.documents import DocumentsPanel
    from app.ui.page_uploads import PageUploads

    uploads = tmp_path / "gradio"  # where Gradio leaves a file uploaded through the page
    uploads.mkdir()
    files = [Path(shutil.copy(CORPUS / name, uploads / name)) for name in ("lighthouse-history.md", "sourdough.html")]
    services = build_services(settings_for(tmp_path / "home", read_ahead=True))
    try:
        list(services.control.start())
        panel = DocumentsPanel(services, PageUploads(lambda: {str(f) for f in files}))
        services.documents.get().ingestor.open_collection("Coast notes")
        monkeypatch.setattr(warming, "on_battery", lambda: True)
        on_battery = [str(out[0]) for out in panel.add_files("Coast notes", [str(files[0])])]
        monkeypatch.setattr(warming, "on_battery", lambda: False)
        plugged_in = [str(out[0]) for out in panel.add_files("Coast notes", [str(files[1])])]
    finally:
        services.close()
    assert not any("ahead" in line for line in on_battery)
    reading = [line for line in plugged_in if "Reading the new passages ahead" in line]
    assert reading and "estimating" in reading[0] and "0 of " in reading[0]
    assert "passages ahead: questions that find them start answering sooner." in plugged_in[-1]  # it stays
    assert plugged_in[-1].startswith("Added 1 file (")  # under the upload's report
    assert any((tmp_path / "home" / "cache" / "passages").rglob("*.kv"))
