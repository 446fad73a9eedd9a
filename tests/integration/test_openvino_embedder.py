"""The embedded MiniLM run by OpenVINO (rag/retrieval/openvino_embedder.py) against sentence-transformers running
it: the same vectors to float32's last bits and the same tokens, a collection built by one searched by the other,
the settings switch, the threads it is given, a damaged converted model made again, a model that cannot be
converted named with what to do, and the converted model kept where another account cannot read it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from app.paths import ensure_data_dir, resolve_data_paths
from app.services.library.documents import build_documents
from app.settings import load_settings
from rag.retrieval.embeddings import SentenceTransformerEmbedder, configured_embedder, embedded_minilm_path
from rag.retrieval.openvino_embedder import (
    CONVERTED,
    EmbedderConversionError,
    OpenVinoEmbedder,
    embedder_cache_dir,
    model_key,
)
from tests.integration.conftest import as_other

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
LONG = " ".join(f"word{n} of a passage that runs well past what the model reads" for n in range(120))
TEXTS = [
    "The boat Marigold is moored at pier 7.",
    "",
    "a",
    "ünïcödé ✓ 日本語 text, with punctuation: (brackets) [and] {braces}!",
    LONG,  # over 256 tokens: cut at the model's length both ways
    *(path.read_text(encoding="utf-8")[:1200] for path in sorted(CORPUS.glob("*.md")) + sorted(CORPUS.glob("*.txt"))),
]


@pytest.fixture(scope="module")
def cache() -> Iterator[Path]:
    """A cache folder under folders other accounts may enter (0755, set here whatever the umask: CI's made them
    owner-only), so that a refusal is the cache's own."""
    parent = Path(tempfile.mkdtemp(prefix="hearth-open-", dir="/tmp"))
    (parent / "hearth").mkdir()
    for folder in (parent, parent / "hearth"):
        folder.chmod(0o755)
    try:
        yield parent / "hearth" / "embedders"
    finally:
        shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture(scope="module")
def runs(cache: Path) -> OpenVinoEmbedder:
    return OpenVinoEmbedder(embedded_minilm_path(), "all-MiniLM-L6-v2", cache)


def test_the_vectors_and_the_tokens_are_sentence_transformers_own(
    runs: OpenVinoEmbedder, sentence_transformers: SentenceTransformerEmbedder
) -> None:
    ours, theirs = runs.embed(TEXTS), sentence_transformers.embed(TEXTS)
    assert ours.shape == theirs.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    assert float(np.abs(ours - theirs).max()) < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    reference_model = sentence_transformers
    assert (runs.name, runs.dimension, runs.max_tokens) == (
        reference_model.name,
        reference_model.dimension,
        reference_model.max_tokens,
    )
    counting, reference = runs.tokenizer(), sentence_transformers.tokenizer()
    for text in TEXTS:
        for special in (True, False):
            mine = counting(text, add_special_tokens=special, return_offsets_mapping=True)
            hf = reference(text, add_special_tokens=special, return_offsets_mapping=True, truncation=False)
            assert mine["input_ids"] == hf["input_ids"]
            assert [tuple(o) for o in mine["offset_mapping"]] == [tuple(o) for o in hf["offset_mapping"]]
    many = counting(TEXTS, add_special_tokens=True)["input_ids"]
    assert many == reference(TEXTS, add_special_tokens=True, truncation=False)["input_ids"]
    assert runs.count_tokens(LONG) == sentence_transformers.count_tokens(LONG) > runs.max_tokens


def test_a_collection_built_by_one_is_searched_by_the_other(
    tmp_path: Path, sentence_transformers: SentenceTransformerEmbedder, runs: OpenVinoEmbedder
) -> None:
    settings = load_settings(home=tmp_path / "home")
    paths = ensure_data_dir(resolve_data_paths(settings.home))
    built = build_documents(settings, paths, sentence_transformers)
    try:
        list(built.ingestor.ingest([CORPUS], "notes"))
        question = "When was the lighthouse built?"
        expected = [p.chunk.text for p in built.retriever.search("notes", question, top_k=3).passages]
    finally:
        built.close()
    searched = build_documents(settings, paths, runs)
    try:
        found = [p.chunk.text for p in searched.retriever.search("notes", question, top_k=3).passages]
        list(searched.ingestor.ingest([CORPUS / "garden-guide.txt"], "more"))  # and it indexes as well
        assert searched.retriever.search("more", "garden", top_k=1).passages
    finally:
        searched.close()
    assert found == expected and "lighthouse" in found[0].lower()


def test_the_setting_chooses_the_runtime(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache.parent.parent))
    assert embedder_cache_dir() == cache
    assert isinstance(configured_embedder("openvino"), OpenVinoEmbedder)
    assert isinstance(configured_embedder("sentence-transformers"), SentenceTransformerEmbedder)
    monkeypatch.delenv("HEARTH_RAG__EMBEDDER_RUNTIME", raising=False)
    assert load_settings().rag.embedder_runtime == "openvino"  # the default
    monkeypatch.setenv("HEARTH_RAG__EMBEDDER_RUNTIME", "sentence-transformers")
    assert load_settings().rag.embedder_runtime == "sentence-transformers"


def test_without_a_cache_folder_sentence_transformers_embeds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))  # as for an account whose home is not its own
    assert isinstance(configured_embedder("openvino"), SentenceTransformerEmbedder)


def test_the_threads_it_is_given_are_the_compiled_model_s_from_its_next_batch(cache: Path) -> None:
    sharing = OpenVinoEmbedder(embedded_minilm_path(), "all-MiniLM-L6-v2", cache)
    every = sharing.embed(TEXTS)
    cores = sharing.compiled_threads()
    sharing.set_threads(1)
    assert sharing.compiled_threads() == cores  # nothing changes until the next batch
    one = sharing.embed(TEXTS)
    assert sharing.compiled_threads() == 1
    sharing.set_threads(cores)
    again = sharing.embed(TEXTS)
    assert sharing.compiled_threads() == cores
    assert float(np.abs(one - every).max()) < 1e-6 and float(np.abs(again - every).max()) < 1e-6


def test_a_damaged_converted_model_is_made_again(runs: OpenVinoEmbedder, cache: Path, tmp_path: Path) -> None:
    runs.embed(["made once"])
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    converted = copy / model_key(embedded_minilm_path()) / CONVERTED
    converted.write_text(converted.read_text()[:500])  # cut short, as a full disk or a kill would leave it
    again = OpenVinoEmbedder(embedded_minilm_path(), "all-MiniLM-L6-v2", copy)
    assert np.allclose(again.embed(["made once"]), runs.embed(["made once"]), atol=1e-6)
    assert len(converted.read_text()) > 500


def test_a_model_that_cannot_be_converted_is_named_with_what_to_do(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(embedded_minilm_path(), folder)
    (folder / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    with pytest.raises(EmbedderConversionError) as refused:
        OpenVinoEmbedder(folder, "broken", tmp_path / "cache").embed(["anything"])
    assert str(folder) in refused.value.message and "embedder_runtime" in refused.value.remedy
    assert not any((tmp_path / "cache").iterdir())  # nothing half-made is left to be found later


def test_another_account_cannot_read_the_converted_model(
    runs: OpenVinoEmbedder, cache: Path, other_account: tuple[int, int]
) -> None:
    runs.embed(["made once"])
    assert cache.stat().st_mode & 0o777 == 0o700 and cache.stat().st_uid == os.getuid()
    converted = cache / model_key(embedded_minilm_path()) / CONVERTED
    assert as_other(other_account, "/usr/bin/ls", str(cache)).returncode != 0
    read = as_other(other_account, "/usr/bin/head", "-c", "16", str(converted))
    assert read.returncode != 0 and "Permission denied" in read.stderr
    # the parent is open to it: the refusal is the cache's own
    assert as_other(other_account, "/usr/bin/ls", str(cache.parent)).returncode == 0


def test_the_process_that_embeds_imports_neither_torch_nor_sentence_transformers(cache: Path) -> None:
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from rag.retrieval.embeddings import embedded_minilm_path\n"
        "from rag.retrieval.openvino_embedder import OpenVinoEmbedder\n"
        f"vectors = OpenVinoEmbedder(embedded_minilm_path(), 'm', Path({str(cache)!r})).embed(['a question'])\n"
        "assert vectors.shape == (1, 384)\n"
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))\n"
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.strip() == "[]"
