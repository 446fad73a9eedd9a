"""Retrieval quality cannot drift unseen: the committed 138-question set over real Debian manuals
(the bash reference PDF, the shared-mime-info spec, Python's HTML pages and HOWTOs as Word files, pip's Markdown
topics, the release tables) is answered by Hearth's own search, and hit@1 must stay within 0.02 of the figure
recorded beside the set. A change that moves it more than that, either way, records the new figure in the same
commit (`bench/rag_retrieval.py` prints it).

The corpus comes from Debian's documentation packages, which `.ci/run` installs; the test installs nothing. The
passages' vectors are kept in the account's cache between runs (tests/kept_vectors.py): a passage whose text, model
and runtime are unchanged is not embedded again, which is most of the index's cost."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.paths import ensure_data_dir, resolve_data_paths
from app.services.library.documents import DocumentServices, build_documents
from app.settings import load_settings
from rag.evaluation import Retrieved, evaluate, read_questions
from rag.retrieval.embeddings import Embedder, embedded_minilm_path
from tests.helpers import require
from tests.kept_vectors import KeptVectors, model_identity

pytestmark = pytest.mark.integration

BENCH = Path(__file__).resolve().parents[2] / "bench"
QUESTIONS = BENCH / "data" / "debian-docs-retrieval.jsonl"
RECORDED = BENCH / "data" / "debian-docs-retrieval.recorded.json"
CORPUS_SCRIPT = BENCH / "corpus" / "debian_docs.sh"
PACKAGES = ("bash-doc", "python3.11-doc", "distro-info-data", "shared-mime-info", "python3-pip", "pandoc")
TOLERANCE = 0.02


def installed(package: str) -> bool:
    found = subprocess.run(["dpkg", "-s", package], capture_output=True, check=False)
    return found.returncode == 0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [p for p in PACKAGES if shutil.which("dpkg") is None or not installed(p)]
    require(not missing, f"Debian's {', '.join(missing)}", f"apt-get install -y {' '.join(missing)}")
    folder = tmp_path_factory.mktemp("debian-docs")
    made = subprocess.run(["bash", str(CORPUS_SCRIPT), str(folder)], capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    return folder


@pytest.fixture(scope="module")
def indexed(corpus: Path, tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[DocumentServices]:
    settings = load_settings(home=tmp_path_factory.mktemp("floor-home"))
    kept = KeptVectors(embedder, model_identity(embedder, embedded_minilm_path()))
    documents = build_documents(settings, ensure_data_dir(resolve_data_paths(settings.home)), kept)
    try:
        outcomes = [e for e in documents.ingestor.ingest([corpus], "debian docs") if hasattr(e, "outcome")]
        skipped = [(e.path, e.reason) for e in outcomes if getattr(e, "outcome", "") == "skipped"]
        assert not skipped, skipped
        yield documents
    finally:
        documents.close()
        kept.close()


def test_hit_at_1_on_the_debian_set_stays_at_the_recorded_figure(indexed: DocumentServices) -> None:
    recorded = json.loads(RECORDED.read_text())
    questions = read_questions(QUESTIONS)

    def search(question: str) -> list[Retrieved]:
        found = indexed.retriever.search("debian docs", question, top_k=5)
        return [Retrieved(Path(p.chunk.path).name, p.chunk.page, p.chunk.text) for p in found.passages]

    report = evaluate(questions, search, top_k=5)
    figures = f"hit@1 {report.hit_at_1:.3f}, hit@5 {report.hit_at_k:.3f} on {len(questions)} questions"
    assert report.hit_at_1 >= recorded["hit_at_1"] - TOLERANCE, (
        f"retrieval got worse: {figures}; {RECORDED.name} records hit@1 {recorded['hit_at_1']:.3f}"
    )
    assert report.hit_at_1 <= recorded["hit_at_1"] + TOLERANCE, (
        f"retrieval got better: {figures}; record the new figures in {RECORDED.name} (and the README)"
    )


def test_an_option_asked_about_comes_with_the_line_that_defines_it(indexed: DocumentServices) -> None:
    # The bash manual's option list, as its PDF gives it: entries one line after another, no blank line between.
    # The passages found for this question began inside the entry for -e, after its defining line, which left the
    # model guessing; now such a passage comes with that line in front.
    found = indexed.retriever.search("debian docs", "What does set -e do in bash?", top_k=3)
    texts = [" ".join(p.chunk.text.split()) for p in found.passages]
    assert any(t.startswith("-e Exit immediately if a pipeline") for t in texts), [t[:160] for t in texts]
