"""The catalog keeps each file's facts (listing does not parse files again), the fit says when llama.cpp cannot
run a model at all, and the page's import by path answers alike for every path that is not a GGUF model."""

import dataclasses
import os
import shutil
import sqlite3
import struct
from pathlib import Path

import pytest

from app.services.catalog.models import PathNotImportable, import_typed_path
from backends import registry
from backends.plan import Preferences
from models.fit import fit_verdict
from models.shared.errors import ModelFileError
from models.store import ModelStore
from tests.gguf_files import EmptyStrings, write_model
from tests.helpers import make_inventory, write_tiny_gguf
from tests.unit.test_selection_fixtures import SMALL


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    return ModelStore(tmp_path / "models.db", tmp_path / "owned", None)


def rewrite_keeping_stamp(path: Path, old: bytes, new: bytes) -> None:
    """Change the file's content in place, keeping its size and modification time (what the cache looks at)."""
    seen = path.stat()
    data = path.read_bytes()
    assert len(old) == len(new) and data.count(old) == 1
    path.write_bytes(data.replace(old, new))
    os.utime(path, ns=(seen.st_atime_ns, seen.st_mtime_ns))


def test_facts_are_kept_while_the_file_is_unchanged_and_read_again_when_it_changes(
    store: ModelStore, tmp_path: Path
) -> None:
    path = write_tiny_gguf(tmp_path / "model.gguf", context_length=2048)
    store.add(path)
    context_key = b"llama.context_length" + struct.pack("<I", 4)
    rewrite_keeping_stamp(path, context_key + struct.pack("<I", 2048), context_key + struct.pack("<I", 4096))
    assert store.model_info(path).trained_context_length == 2048  # the kept facts: the file was not parsed

    os.utime(path)  # a new modification time: hashed, found to be new content, parsed
    assert store.model_info(path).trained_context_length == 4096
    rewrite_keeping_stamp(path, context_key + struct.pack("<I", 4096), context_key + struct.pack("<I", 1024))
    assert store.model_info(path).trained_context_length == 4096

    with sqlite3.connect(tmp_path / "models.db") as db:  # facts written by another version of the reader
        db.execute("UPDATE model_facts SET facts_version = 0")
    assert store.model_info(path).trained_context_length == 1024


def test_facts_belong_to_the_content_not_the_path(store: ModelStore, tmp_path: Path) -> None:
    original = write_tiny_gguf(tmp_path / "first-name.gguf")
    assert store.model_info(original).name == "first-name"
    renamed = tmp_path / "second-name.gguf"
    shutil.copy2(original, renamed)
    info = store.model_info(renamed)
    assert (info.name, info.path) == ("second-name", renamed)


def test_a_refusal_is_kept_too(store: ModelStore, tmp_path: Path) -> None:
    hostile = write_model(tmp_path / "hostile.gguf", entries=[EmptyStrings("tokenizer.ggml.tokens", 2_000_000)])
    with pytest.raises(ModelFileError, match="2,000,000 items") as first:
        store.model_info(hostile)
    with pytest.raises(ModelFileError) as second:
        store.model_info(hostile)
    assert (second.value.message, second.value.remedy) == (first.value.message, first.value.remedy)
    with sqlite3.connect(tmp_path / "models.db") as db:
        assert db.execute("SELECT count(*) FROM model_facts WHERE facts LIKE '%refusal%'").fetchone() == (1,)
    with pytest.raises(ModelFileError, match="not found"):  # about the path, not kept
        store.model_info(tmp_path / "gone.gguf")


def test_an_architecture_llamacpp_does_not_know_cannot_run_here() -> None:
    foo = dataclasses.replace(SMALL, architecture="foo")
    laptop, prefs = make_inventory(ram_available_gib=16), Preferences()
    known = frozenset({"llama", "qwen2", "gemma3"})
    verdict = fit_verdict(laptop, foo, prefs, registry.AUTOMATIC, registry.ALL, known)
    assert (verdict.level, verdict.runnable) == ("red", False)
    assert verdict.summary == "llama.cpp in this Hearth does not know the architecture 'foo'"
    assert fit_verdict(laptop, SMALL, prefs, registry.AUTOMATIC, registry.ALL, known).level == "green"
    assert fit_verdict(laptop, foo, prefs, registry.AUTOMATIC, registry.ALL, None).level == "green"  # cannot tell
    tiny_machine = make_inventory(ram_available_gib=0.05)  # too small as well: the architecture is the reason
    verdict = fit_verdict(tiny_machine, foo, prefs, registry.AUTOMATIC, registry.ALL, known)
    assert not verdict.runnable and "architecture 'foo'" in verdict.summary


def test_the_page_answers_alike_for_every_path_that_is_not_a_gguf_model(store: ModelStore, tmp_path: Path) -> None:
    folder = tmp_path / "folder.gguf"
    folder.mkdir()
    (tmp_path / "notes.gguf").write_text("not a model, but it exists and is 64 bytes long, as a probe might learn")
    (tmp_path / "four.gguf").write_bytes(b"GGUF")
    (tmp_path / "secret.txt").write_text("exists")
    os.mkfifo(tmp_path / "pipe.gguf")
    typed = [
        str(tmp_path / "missing.gguf"),
        str(tmp_path / "missing" / "x.gguf"),
        str(folder),
        str(tmp_path / "notes.gguf"),
        str(tmp_path / "four.gguf"),
        str(tmp_path / "secret.txt"),
        str(tmp_path / "secret.txt" / "x.gguf"),
        str(tmp_path / "pipe.gguf"),
        str(tmp_path),
        "~/surely-not-here.gguf",
        "/etc/passwd",
    ]
    answers = set()
    for text in typed:
        with pytest.raises(PathNotImportable) as refused:
            import_typed_path(store, f"  {text}  ")
        answers.add((refused.value.message, refused.value.remedy))
    assert len(answers) == 1, answers
    assert store.all() == []

    model = write_tiny_gguf(tmp_path / "real.gguf")
    stored, info = import_typed_path(store, str(model))
    assert stored.path == model and info.architecture == "llama"
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(model.read_bytes()[:300])
    with pytest.raises(ModelFileError, match=r"damaged\.gguf is not a valid GGUF file") as refused_gguf:
        import_typed_path(store, str(damaged))  # a GGUF file: its reason is about a model, so it is given
    assert not isinstance(refused_gguf.value, PathNotImportable)
