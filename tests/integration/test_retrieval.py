"""Hybrid retrieval and cited answers on a real collection (MiniLM, Chroma, llama.cpp)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.services.answering.ask import AskStarted, ask
from app.services.answering.chat import ChatService, TurnSaved, TurnStarted
from app.services.answering.turn_settings import TurnSettings
from app.services.container import Services, build_services
from app.services.library.documents import DocumentServices, build_documents
from app.settings import load_settings
from backends.base import GenerationParams, TextDelta, Usage
from rag.manifest import CollectionError
from rag.retrieval.embeddings import Embedder
from tests.helpers import write_pdf

pytestmark = pytest.mark.integration

FACTS = {
    "lighthouse.pdf": [
        "The Skerry lighthouse was built in 1852 by the engineer Alan Brody.",
        "Its lamp is visible for 22 nautical miles and flashes white every 10 seconds.",
    ],
    "keepers.md": "# Keepers\n\nMorag Innes was the last keeper; she left in 1998 when the light was automated.\n",
    "garden.txt": "Tomatoes need six hours of sun a day and should be watered at the roots, not the leaves.",
    "bikes.txt": "Replacement chain part XR-7742 fits all eleven-speed road bikes sold after 2019.",
    "bread.txt": "Sourdough starter should be fed with equal weights of flour and water every twelve hours.",
}
QUESTIONS = [
    ("Who built the Skerry lighthouse?", "lighthouse.pdf"),
    ("How far away can the lamp be seen?", "lighthouse.pdf"),
    ("When did the last keeper leave?", "keepers.md"),
    ("How much sun do tomato plants need?", "garden.txt"),
    ("XR-7742", "bikes.txt"),
    ("How often do I feed a sourdough starter?", "bread.txt"),
]


@pytest.fixture
def documents(isolated_home: Path, tmp_path: Path, embedder: Embedder) -> Iterator[DocumentServices]:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, content in FACTS.items():
        if name.endswith(".pdf"):
            write_pdf(folder / name, list(content))
        else:
            (folder / name).write_text(str(content))
    settings = load_settings()
    paths = resolve_data_paths(settings.home)
    paths.root.mkdir(parents=True, exist_ok=True)
    services = build_documents(settings, paths, embedder)
    list(services.ingestor.ingest([folder], "facts"))
    yield services
    services.close()


def test_hybrid_retrieval_finds_the_right_file(documents: DocumentServices) -> None:
    ranks = []
    for question, gold in QUESTIONS:
        passages = documents.retriever.search("facts", question, top_k=3).passages
        names = [Path(p.chunk.path).name for p in passages]
        assert gold in names, f"{question!r} -> {names}"
        ranks.append(names.index(gold))
    assert sum(rank == 0 for rank in ranks) >= len(QUESTIONS) - 1


def test_a_search_says_where_its_time_went(documents: DocumentServices) -> None:
    found = documents.retriever.search("facts", "Who built the Skerry lighthouse?", top_k=3)
    steps = (found.keyword_ms, found.vector_ms, found.fusion_ms)
    assert all(step >= 0 for step in steps) and found.vector_ms > 0 and found.embed_ms > 0
    assert abs(sum(steps) - found.search_ms) < 1e-6  # the steps are the whole search, after the embedding


def test_an_exact_code_is_found_by_keywords(documents: DocumentServices) -> None:
    top = documents.retriever.search("facts", "XR-7742", top_k=1).passages[0]
    assert top.keyword_rank == 1
    assert Path(top.chunk.path).name == "bikes.txt"


def test_new_files_are_searchable_right_after_ingestion(documents: DocumentServices, tmp_path: Path) -> None:
    documents.retriever.search("facts", "warm the keyword index", top_k=1)
    extra = tmp_path / "more"
    extra.mkdir()
    (extra / "kites.txt").write_text("Stunt kites need a steady wind of 10 to 25 km/h.")
    list(documents.ingestor.ingest([extra], "facts"))
    top = documents.retriever.search("facts", "stunt kites wind", top_k=1).passages[0]
    assert Path(top.chunk.path).name == "kites.txt"
    assert top.keyword_rank == 1


def test_a_cited_answer_from_the_collection(documents: DocumentServices, chat: Services) -> None:
    events = list(ask(documents, chat.runtime, "facts", "Who built the Skerry lighthouse?", GenerationParams(0.0, 64)))
    started = events[0]
    assert isinstance(started, AskStarted)
    assert [s.number for s in started.found.sources] == list(range(1, len(started.found.sources) + 1))
    assert Path(started.found.sources[0].path).name == "lighthouse.pdf"
    assert started.found.sources[0].page == 1
    assert started.found.sources[0].label == "lighthouse.pdf · page 1"
    answer = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "Brody" in answer
    usage = next(e for e in events if isinstance(e, Usage))
    assert usage.prompt_tokens == started.prompt_tokens <= 1024 - 64


def test_passages_are_cut_to_fit_a_small_context(documents: DocumentServices, isolated_home: Path) -> None:
    small = build_services(load_settings(model={"context_length": 256}))
    try:
        list(small.runtime.load(small.model_choice()))
        events = ask(documents, small.runtime, "facts", "Tell me about the lighthouse.", GenerationParams(0.0, 16))
        started = next(events)
        assert isinstance(started, AskStarted)
        assert 0 < len(started.found.sources) < 5
        assert started.prompt_tokens <= 256 - 16
        list(events)
    finally:
        small.close()


def test_a_chat_turn_answers_from_a_collection_and_keeps_its_sources(
    documents: DocumentServices, chat: Services
) -> None:
    service = ChatService(chat.store, chat.runtime, lambda: documents)
    params = GenerationParams(0.0, 48)
    events = list(
        service.send(None, "Who built the Skerry lighthouse?", TurnSettings(params, "Be brief.", collection="facts"))
    )
    started, saved = events[0], events[-1]
    assert isinstance(started, TurnStarted) and isinstance(saved, TurnSaved)
    assert Path(started.sources[0].path).name == "lighthouse.pdf"
    assert started.retrieve_ms > 0
    assert saved.message.sources == started.sources
    assert saved.message.stats is not None and saved.message.stats.retrieve_ms == started.retrieve_ms
    conversation = chat.store.get(started.conversation_id)
    assert conversation.collection == "facts"
    assert conversation.messages[0].content == "Who built the Skerry lighthouse?"  # stored without the passages
    assert conversation.messages[1].sources == started.sources

    again = list(service.regenerate(conversation.id, TurnSettings(params, "Be brief.", collection="facts")))
    assert isinstance(again[0], TurnStarted) and again[0].sources == started.sources

    plain = list(service.send(conversation.id, "Thanks!", TurnSettings(params, "Be brief.")))
    assert isinstance(plain[0], TurnStarted) and plain[0].sources == ()
    assert chat.store.get(conversation.id).collection is None
    assert len(chat.store.get(conversation.id).messages) == 4


def test_a_follow_up_keeps_the_numbers_of_passages_already_shown(documents: DocumentServices, chat: Services) -> None:
    service = ChatService(chat.store, chat.runtime, lambda: documents, top_k=3)
    params = GenerationParams(0.0, 16)
    events = list(service.send(None, "Who built the Skerry lighthouse?", TurnSettings(params, "", collection="facts")))
    first = events[0]
    assert isinstance(first, TurnStarted)
    follow_up = "And how much sun do tomato plants need?"
    list(service.send(first.conversation_id, follow_up, TurnSettings(params, "", collection="facts")))
    follow = chat.store.get(first.conversation_id).messages[-1].sources
    before = {s.text: s.number for s in first.sources}
    assert any(s.text in before for s in follow) and any(s.text not in before for s in follow)
    for source in follow:
        if source.text in before:
            assert source.number == before[source.text]
        else:
            assert source.number > max(before.values())
    assert len({s.number for s in follow}) == len(follow)


def test_a_question_about_a_missing_collection_stores_nothing(documents: DocumentServices, chat: Services) -> None:
    service = ChatService(chat.store, chat.runtime, lambda: documents)
    with pytest.raises(CollectionError) as caught:
        list(service.send(None, "Anything?", TurnSettings(GenerationParams(0.0, 8), "", collection="no such thing")))
    assert "facts" in caught.value.message  # names the collections that do exist
    assert chat.store.list() == []


def test_a_local_cross_encoder_reorders_the_fused_candidates(documents: DocumentServices, tmp_path: Path) -> None:
    import torch

    from rag.retrieval.embeddings import embedded_minilm_path
    from rag.retrieval.rerank import CrossEncoderReranker, RerankerUnavailable
    from rag.retrieval.retriever import Retriever

    # No cross-encoder ships with Hearth; MiniLM's own weights with a fresh scoring head exercise the same path
    # (the scores are arbitrary, so the test checks the order follows them, not that it is better).
    torch.manual_seed(0)
    reranker = CrossEncoderReranker(embedded_minilm_path())
    retriever = Retriever(documents.manifest, documents.store, documents.embedder, reranker)
    question = "Who built the Skerry lighthouse?"
    found = retriever.search("facts", question, top_k=3).passages
    assert len(found) == 3
    candidates = documents.retriever.search("facts", question, top_k=9).passages
    expected = reranker.model().predict([(question, p.chunk.text) for p in candidates])
    best = sorted(zip(expected, (p.chunk.id for p in candidates), strict=True), reverse=True)[:3]
    assert [p.chunk.id for p in found] == [chunk_id for _, chunk_id in best]
    assert [p.score for p in found] == sorted((p.score for p in found), reverse=True)

    with pytest.raises(RerankerUnavailable) as caught:
        CrossEncoderReranker(tmp_path / "nothing-here").rerank(question, found)
    assert "HEARTH_RAG__RERANKER_PATH" in caught.value.remedy


def test_a_follow_up_reads_from_the_cache_what_the_model_has_already_read(
    documents: DocumentServices, chat: Services
) -> None:
    service = ChatService(chat.store, chat.runtime, lambda: documents, top_k=2)
    params = GenerationParams(0.0, 24)
    first = list(service.send(None, "Who built the Skerry lighthouse?", TurnSettings(params, "", collection="facts")))
    started = first[0]
    assert isinstance(started, TurnStarted)
    before = next(e for e in first if isinstance(e, Usage))
    follow = list(
        service.send(
            started.conversation_id, "How much sun do tomatoes need?", TurnSettings(params, "", collection="facts")
        )
    )
    usage = next(e for e in follow if isinstance(e, Usage))
    read_before = before.prompt_tokens + before.completion_tokens
    assert usage.cached_tokens >= 0.9 * read_before, (usage, before)
    assert usage.prompt_tokens - usage.cached_tokens < usage.prompt_tokens / 2  # only the new turn is read


def test_the_keyword_index_reads_again_only_the_files_that_changed(
    documents: DocumentServices, tmp_path: Path, embedder: Embedder
) -> None:
    import numpy as np

    from rag.chunking import Chunk
    from rag.retrieval.retriever import Retriever

    info = documents.manifest.get("facts")
    calls: list[str] = []
    store = documents.store
    for name in ("all_chunks", "chunks_of"):
        method = getattr(store, name)
        setattr(store, name, lambda *args, _m=method, _n=name: calls.append(_n) or _m(*args))
    retriever = documents.retriever
    first = retriever.keyword_index(info)
    assert calls == ["all_chunks"]  # the first build reads every passage, in pages
    added = tmp_path / "ferry.txt"
    added.write_text("The island ferry leaves the harbour at 07:15 and returns at 18:40 on weekdays.")
    list(documents.ingestor.ingest([added], "facts"))
    # A file whose adding was cut short: its passages are in the store, with no record of the file.
    store.replace_file(
        info.store_name,
        info.embedder,
        "/cut/short.txt",
        [Chunk("cut-0", "ferry ferry ferry", 0, None, None)],
        np.asarray(embedder.embed(["ferry"]), dtype=np.float32),
    )
    calls.clear()
    refreshed = retriever.keyword_index(info)
    assert calls == ["chunks_of"]  # only the new file read; the others' passages and terms reused
    assert len(refreshed.chunks) == len(first.chunks) + 1 and "/cut/short.txt" not in refreshed.by_file
    fresh = Retriever(documents.manifest, store, embedder).keyword_index(info)  # built from nothing
    assert [c.id for c in fresh.chunks] == [c.id for c in refreshed.chunks]
    for query in ("ferry harbour 07:15", "XR-7742", "sourdough starter flour", "lighthouse engineer"):
        assert refreshed.index.search(query, 5) == fresh.index.search(query, 5)
    found = retriever.search("facts", "When does the ferry leave the harbour?", top_k=3)
    assert any("07:15" in p.chunk.text for p in found.passages)
    assert not any(p.chunk.path == "/cut/short.txt" for p in found.passages if p.keyword_rank is not None)


def test_a_collection_built_by_another_embedder_is_refused_with_its_name(documents: DocumentServices) -> None:
    documents.manifest.create("elsewhere", "another-embedding-model")  # as a Hearth with another embedder made it
    with pytest.raises(CollectionError) as refused:
        documents.retriever.search("elsewhere", "Who built the Skerry lighthouse?", top_k=3)
    assert "built with the embedder another-embedding-model" in refused.value.message
    assert documents.embedder.name in refused.value.message and "add its documents again" in refused.value.remedy
