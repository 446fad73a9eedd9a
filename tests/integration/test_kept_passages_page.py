"""Passages read once on the page's own path: with llama.cpp answering one question at a time, the chat
service Hearth builds keeps each passage's cache as it is read and joins it when a later question retrieves it, from
memory and, after Hearth restarts, from the data folder (closed to other accounts); with several slots too; with
`rag.keep_passages` off, passages are read as before. The real engine process, the embedded model, MiniLM and Chroma."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.services.answering.chat import TurnStarted
from app.services.answering.turn_settings import TurnSettings
from app.services.container import Services, build_services
from app.settings import load_settings
from backends.base import GenerationParams, Usage
from tests.integration.conftest import as_other

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
PARAMS = GenerationParams(temperature=0.0, max_new_tokens=4)
ASKED = "Who designed the Skerry lighthouse?"
UNRELATED = "How long does sourdough starter take to get going?"  # the slot's cache then holds another prompt
REWORDED = ("Skerry lighthouse: who was its designer?", "The lighthouse on Skerry, who designed it?")


def start(home: Path, keep: bool = True, slots: int = 1, recompute: float = 0.2) -> Services:
    settings = load_settings(
        home=home,
        model={"context_length": 2048},
        # no conversations' caches on disk: a new conversation could otherwise load an earlier one's prompt whole
        backend={"name": "llamacpp", "slots": slots, "conversation_cache_mb": 0},
        rag={"keep_passages": keep, "passage_recompute": recompute},
    )
    services = build_services(settings)
    list(services.control.start())
    return services


def usage(services: Services, question: str) -> Usage:
    turn = TurnSettings(PARAMS, "", collection="Coast notes")
    return next(e for e in services.chat.send(None, question, turn) if isinstance(e, Usage))


def test_the_page_joins_passages_read_before_and_after_a_restart(
    open_folder: Path, embedded_model: Path, llama_cpp_installed: None, other_account: tuple[int, int]
) -> None:
    home = open_folder / "home"
    services = start(home)
    try:
        documents = services.documents.get()
        list(documents.ingestor.ingest([CORPUS / "lighthouse-history.md", CORPUS / "sourdough.html"], "Coast notes"))
        first = usage(services, ASKED)
        usage(services, UNRELATED)
        again = usage(services, REWORDED[0])
    finally:
        services.close()
    assert first.joined_tokens == 0  # nothing was kept before
    assert again.joined_tokens > 0
    assert again.prompt_tokens - again.cached_tokens - again.joined_tokens < again.prompt_tokens / 2

    # After a restart nothing is in memory: the kept caches come from the data folder, which only Hearth's own
    # account can open. Half of each passage is read again now (HEARTH_RAG__PASSAGE_RECOMPUTE), so less is joined.
    folder = home / "cache" / "passages"
    assert folder.is_dir() and folder.stat().st_mode & 0o077 == 0
    kept = [path for path in folder.rglob("*") if path.is_file()]
    assert kept and all(path.stat().st_mode & 0o077 == 0 for path in kept)
    assert as_other(other_account, "/bin/ls", str(folder)).returncode != 0
    restarted = start(home, recompute=0.5)
    try:
        after = usage(restarted, REWORDED[1])
    finally:
        restarted.close()
    assert 0 < after.joined_tokens < again.joined_tokens


def test_with_passages_not_kept_they_are_read_and_with_several_slots_joined_too(
    tmp_path: Path, embedded_model: Path, llama_cpp_installed: None
) -> None:
    joined = {}
    for keep, slots in ((False, 1), (True, 2)):
        home = tmp_path / f"home-{keep}-{slots}"
        services = start(home, keep=keep, slots=slots)
        try:
            documents = services.documents.get()
            list(documents.ingestor.ingest([CORPUS / "lighthouse-history.md"], "Coast notes"))
            turn = TurnSettings(PARAMS, "", collection="Coast notes")
            asked = next(e for e in list(services.chat.send(None, ASKED, turn)) if isinstance(e, TurnStarted))
            services.runtime.forget_owner(asked.conversation_id)  # no slot holds the passages' tokens any more
            usage(services, UNRELATED)
            joined[keep, slots] = usage(services, REWORDED[0]).joined_tokens
        finally:
            services.close()
        kept_files = any(path.is_file() for path in (home / "cache" / "passages").rglob("*"))
        assert kept_files == keep
    assert joined[False, 1] == 0
    assert joined[True, 2] > 0  # each slot has a KV stream of its own: the kept caches travel as bytes
