"""Progress inside a long file, rows as files finish, Cancel in the middle of a file, and token counting without
warnings: the real reader process, the real MiniLM embedder and a real Chroma store in a temp folder."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from app.services.library.documents import DocumentServices
from backends.base import CancelToken
from rag.chunking import chunk_sections
from rag.ingest import FileOutcome, IngestEvent, IngestProgress
from rag.reading.sections import Section
from rag.retrieval.embeddings import default_embedder
from tests.helpers import write_pdf

pytestmark = pytest.mark.integration

TOPICS = ["tides", "lenses", "fog horns", "keepers", "storms", "charts", "buoys", "beacons"]
SHADES = ["amber", "bright", "calm", "dark", "early", "faint", "grey", "high", "icy", "jagged"]
PLACES = ["bay", "cape", "dune", "estuary", "fjord", "gulf", "harbour", "inlet", "jetty", "key"]
TOO_LONG_WARNING = "Token indices sequence length is longer"


def long_pdf(path: Path, pages: int) -> Path:
    """A real PDF of ``pages`` pages (at most 100), each with a few hundred words (several passages per page), no
    two pages alike even with their numbers aside (a line repeated on many pages is a running header)."""
    texts = []
    for n in range(1, pages + 1):
        place = f"the {SHADES[n % 10]} {PLACES[n // 10 % 10]}"
        texts.append(
            " ".join(
                f"Sentence {k} about {place} tells of {TOPICS[(n + k) % len(TOPICS)]} in the log of {1900 + k}."
                for k in range(30)
            )
        )
    return write_pdf(path, texts)


def consistent(documents: DocumentServices, collection: str) -> tuple[int, int]:
    """The chunks the store holds and the chunks the manifest records for ``collection``."""
    info = documents.manifest.get(collection)
    return documents.store.count(info.store_name, info.embedder), documents.manifest.indexed_chunks(info.name)


def test_a_long_pdf_reports_reading_and_embedding_as_it_goes_and_earlier_files_are_done_first(
    documents: DocumentServices, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a-notes.md").write_text("# Notes\n\nThe keeper logs the weather at dawn.\n")
    (folder / "b-empty.txt").write_text("")
    long_pdf(folder / "c-manual.pdf", pages=40)  # more bytes than 64 passages usually take
    events: list[IngestEvent] = list(documents.ingestor.ingest([folder], "Manuals", flush_chunks=64))

    progress = [e for e in events if isinstance(e, IngestProgress) and e.current]
    positions = [e.position for e in progress]
    assert positions == sorted(positions) and sorted(set(positions)) == [1, 2, 3]  # never skips a number
    assert all(e.files_total == 3 for e in progress)
    manual = [e for e in progress if e.current == "c-manual.pdf" and e.step is not None]
    assert {"reading", "splitting", "embedding"} <= {e.step.phase for e in manual if e.step}
    embedded = [e.step for e in manual if e.step and e.step.phase == "embedding"]
    done = [step.done for step in embedded]
    assert len(done) > 3 and done == sorted(done) and done[-1] == embedded[-1].total  # many steps, all passages
    assert embedded[-1].per_s > 0 and embedded[-1].eta_s == 0

    outcomes = {Path(e.path).name: e for e in events if isinstance(e, FileOutcome)}
    assert {name: o.outcome for name, o in outcomes.items()} == {
        "a-notes.md": "indexed",
        "b-empty.txt": "skipped",
        "c-manual.pdf": "indexed",
    }
    # The small file's row is ready before the big one is even read, not at the very end.
    first_reading = next(i for i, e in enumerate(events) if e in manual and e.step and e.step.phase == "reading")
    assert events.index(outcomes["a-notes.md"]) < first_reading
    final = events[-1]
    assert isinstance(final, IngestProgress) and final.current == "" and final.files_done == 3
    assert consistent(documents, "Manuals")[0] == consistent(documents, "Manuals")[1] > 0


def test_cancel_while_a_file_is_embedded_stops_at_once_and_keeps_the_earlier_version(
    documents: DocumentServices, tmp_path: Path
) -> None:
    manual = write_pdf(tmp_path / "manual.pdf", ["The fog horn sounds twice a minute in thick weather."])
    assert [e.outcome for e in documents.ingestor.ingest([manual], "Kept") if isinstance(e, FileOutcome)] == ["indexed"]
    before = consistent(documents, "Kept")

    long_pdf(manual, pages=40)  # a new, long version of the same file
    cancel = CancelToken()
    after_cancel: list[IngestEvent] = []
    for event in documents.ingestor.ingest([manual], "Kept", cancel, flush_chunks=64):
        if cancel.cancelled:
            after_cancel.append(event)
        elif isinstance(event, IngestProgress) and event.step and event.step.phase == "embedding" and event.step.done:
            cancel.cancel()  # the first passages are embedded, most are not
    assert cancel.cancelled, "the file was never seen being embedded"
    stopped = [e for e in after_cancel if isinstance(e, FileOutcome)]
    assert [(o.outcome, o.cancelled) for o in stopped] == [("skipped", True)]
    # Nothing more was embedded after Cancel: the next call to the embedder never came.
    assert not [e for e in after_cancel if isinstance(e, IngestProgress) and e.step and e.step.phase == "embedding"]

    # Rolled back: the earlier version is still the one recorded and searched, and store and manifest agree.
    assert consistent(documents, "Kept") == before
    (record,) = documents.files("Kept")
    assert record.chunks == before[1]
    top = documents.retriever.search("Kept", "fog horn thick weather", top_k=1).passages[0]
    assert "fog horn" in top.chunk.text

    redo = [e for e in documents.ingestor.ingest([manual], "Kept") if isinstance(e, FileOutcome)]
    assert [o.outcome for o in redo] == ["indexed"] and redo[0].chunks > before[1]
    assert consistent(documents, "Kept") == (redo[0].chunks, redo[0].chunks)


def test_cancel_while_a_file_is_read_records_nothing(documents: DocumentServices, tmp_path: Path) -> None:
    manual = long_pdf(tmp_path / "manual.pdf", pages=20)
    cancel = CancelToken()
    outcomes = []
    for event in documents.ingestor.ingest([manual], "Unread", cancel):
        if isinstance(event, IngestProgress) and event.step and event.step.phase == "reading":
            cancel.cancel()
        elif isinstance(event, FileOutcome):
            outcomes.append(event)
    assert [(o.outcome, o.reason, o.cancelled) for o in outcomes] == [
        ("skipped", "cancelled while it was being read", True)
    ]
    assert documents.files("Unread") == []
    assert consistent(documents, "Unread") == (0, 0)


class _Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_counting_tokens_of_text_longer_than_the_model_reads_logs_no_warning() -> None:
    embedder = default_embedder()  # a fresh one: the library warns only once per tokenizer
    heard = _Collected()
    library = logging.getLogger("transformers")
    library.addHandler(heard)
    try:
        text = "The beam sweeps the bay. " * 120  # about 700 tokens, far past MiniLM's 256
        assert embedder.count_tokens(text) > embedder.max_tokens
        chunks = chunk_sections([Section(text)], embedder.tokenizer(), "0" * 64, embedder.max_tokens)
        assert len(chunks) > 2 and all(embedder.count_tokens(c.text) <= embedder.max_tokens for c in chunks)
        assert embedder.embed([c.text for c in chunks]).shape == (len(chunks), embedder.dimension)
        assert not [m for m in heard.messages if TOO_LONG_WARNING in m], heard.messages
        # The model's own tokenizer keeps its limit (and would have warned: the check above can fail).
        model_tokenizer = embedder.model().tokenizer
        assert model_tokenizer.model_max_length == embedder.max_tokens
        model_tokenizer(text, truncation=False)
        assert [m for m in heard.messages if TOO_LONG_WARNING in m]
    finally:
        library.removeHandler(heard)


def test_the_runs_estimate_comes_with_the_first_passages_of_the_first_file(
    documents: DocumentServices, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    long_pdf(folder / "a-manual.pdf", pages=30)
    (folder / "b-notes.md").write_text("# Notes\n\nThe keeper logs the weather at dawn.\n")
    events: list[IngestEvent] = list(documents.ingestor.ingest([folder], "Estimates", flush_chunks=64))
    first_done = next(i for i, e in enumerate(events) if isinstance(e, FileOutcome))
    embedding = [
        e
        for e in events[:first_done]
        if isinstance(e, IngestProgress) and e.step is not None and e.step.phase == "embedding" and e.step.done
    ]
    assert embedding, "the first file's passages were embedded in one go"
    assert all(e.eta_s is not None and e.eta_s > 0 for e in embedding)  # before any file is done
