"""Sharing the CPU while files are indexed, on the real parts: llama.cpp computes with the threads it is given from
its next step on, through the engine process too, and an answer written while the test corpus is indexed through
the page's sharing completes, as does the indexing, with the embedder on its share and everything as planned after.
(How fast each goes is `hearth bench contention`'s job.)"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.services.container import Services
from app.services.library.uploads import add_uploads
from backends.base import CancelToken, ChatMessage, Finished, GenerationParams, LoadOptions, TextDelta
from backends.llamacpp.backend import LlamaCppBackend
from models.gguf import ModelInfo
from rag.retrieval.embeddings import Embedder
from rag.retrieval.openvino_embedder import OpenVinoEmbedder

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
PARAMS = GenerationParams(temperature=0.0, max_new_tokens=16, repeat_penalty=1.0)
MESSAGES = [ChatMessage("system", "You are a helpful assistant."), ChatMessage("user", "Name three colours.")]


@pytest.fixture
def backend(model_info: ModelInfo) -> Iterator[LlamaCppBackend]:
    loaded = LlamaCppBackend()
    list(loaded.load(model_info, LoadOptions(1024, threads=2, seed=7, slots=1)))
    yield loaded
    loaded.close()


def _threads(backend: LlamaCppBackend) -> int:
    import llama_cpp

    assert backend._engine is not None  # what llama.cpp was told is what is checked
    return int(llama_cpp.llama_n_threads(backend._engine.ctx))


def _embedder_threads(embedder: Embedder) -> int:
    """What the embedder computes with, as its runtime reports it."""
    if isinstance(embedder, OpenVinoEmbedder):
        return embedder.compiled_threads()
    import torch

    return int(torch.get_num_threads())


def test_llama_cpp_takes_the_threads_it_is_given_from_its_next_step(backend: LlamaCppBackend) -> None:
    plain = list(backend.stream_chat(MESSAGES, PARAMS, CancelToken()))
    assert _threads(backend) == 2
    backend.set_threads(1)
    fewer = list(backend.stream_chat(MESSAGES, PARAMS, CancelToken()))
    assert _threads(backend) == 1
    backend.set_threads(None)
    list(backend.stream_chat(MESSAGES, PARAMS, CancelToken()))
    assert _threads(backend) == 2  # as loaded
    text = ["".join(e.text for e in events if isinstance(e, TextDelta)) for events in (plain, fewer)]
    assert text[0] == text[1] and text[0].strip()  # the same arithmetic, on fewer threads


def test_an_answer_written_while_files_are_indexed_completes_and_so_does_the_indexing(
    chat: Services, isolated_home: Path
) -> None:
    seen: list[int] = []
    sharing = chat.cpu
    original = sharing._set_embedder_threads  # see what the embedder is given, and still give it

    def record(threads: int) -> None:
        seen.append(threads)
        original(threads)

    sharing._set_embedder_threads = record
    docs = chat.documents.get()
    answers: list[list[object]] = []

    def ask() -> None:
        with chat.runtime.lease() as engine:
            answers.append(list(engine.stream_chat(MESSAGES, PARAMS, CancelToken())))

    with sharing.indexing():
        asking = threading.Thread(target=ask)
        asking.start()
        events = list(
            add_uploads(docs, "corpus", sorted(CORPUS.iterdir()), CancelToken(), sharing.before_batch, flush_chunks=4)
        )
        asking.join(timeout=120)
    assert answers and isinstance(answers[0][-1], Finished)
    from rag.ingest import FileOutcome

    outcomes = [e.outcome for e in events if isinstance(e, FileOutcome)]
    assert outcomes == ["indexed"] * len(list(CORPUS.iterdir())), events  # every file of the corpus went in
    assert seen and seen[-1] == chat.inventory.physical_cores  # every core back once the run ended
    docs.embedder.embed(["one more batch"])  # OpenVINO's compiled model takes its threads at its next batch
    assert _embedder_threads(docs.embedder) == chat.inventory.physical_cores
    assert sharing._applied is not None and sharing._applied.engine is None  # the engine as planned again
