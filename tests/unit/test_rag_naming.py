import re
from pathlib import Path

import pytest

from rag.chunking import chunk_id
from rag.ingest import discover
from rag.manifest import CollectionError, normalize_name, store_name_for
from rag.reading.loaders import Skipped, detect_encoding
from rag.server_collections import SERVER_PREFIX, on_server

CHROMA_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$")


@pytest.mark.parametrize(
    "name", ["My Notes!", "日本語のメモ", "a", "../../etc", "x" * 100, "Q3 report / draft #2", "--"]
)
def test_any_display_name_maps_to_a_valid_store_name(name: str) -> None:
    assert CHROMA_NAME.match(store_name_for(name))


def test_store_names_do_not_collide_for_names_that_slug_alike() -> None:
    assert store_name_for("Work Notes") != store_name_for("work-notes")


@pytest.mark.parametrize("name", ["My Notes!", "日本語のメモ", "a", "hs", "kb-x"])
def test_a_server_collection_s_store_name_says_where_it_lives(name: str) -> None:
    here, there = store_name_for(name), store_name_for(name, SERVER_PREFIX)
    assert CHROMA_NAME.match(there) and here != there
    assert on_server(there) and not on_server(here)


@pytest.mark.parametrize(
    ("raw", "problem"), [("   ", "needs a name"), ("x" * 101, "101 characters"), ("tab\x07bell", "control")]
)
def test_unusable_names_are_refused_with_a_remedy(raw: str, problem: str) -> None:
    with pytest.raises(CollectionError) as caught:
        normalize_name(raw)
    assert problem in caught.value.message
    assert caught.value.remedy


def test_names_are_tidied() -> None:
    assert normalize_name("  work   notes ") == "work notes"


def test_chunk_ids_are_deterministic_and_positional() -> None:
    assert chunk_id("abc", 0) == chunk_id("abc", 0)
    assert chunk_id("abc", 0) != chunk_id("abc", 1)
    assert chunk_id("abc", 0) != chunk_id("abd", 0)


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("Le château se trouve à côté de la forêt. Où est la crème brûlée? Il a été très content.", "cp1252"),
        ("Crème brûlée à la carte, très bon. Le café est à côté.", "cp1252"),
        ("Grüße aus Köln, schöne Straße, Übermaß an Äpfeln.", "latin-1"),
        ("¿Dónde está el niño? ¡Mañana será otro día!", "latin-1"),
        ("Καλημέρα κόσμε, τι κάνεις σήμερα;", "cp1253"),
        ("Zażółć gęślą jaźń. Pchnąć w tę łódź jeża lub ośm skrzyń fig.", "cp1250"),
        ("Съешь же ещё этих мягких французских булок, да выпей чаю.", "cp1251"),
        ("日本語のテキストファイルです。東京は大きな都市です。", "shift_jis"),
        ("Grüße aus Köln", "utf-16"),
        ("Grüße aus Köln", "utf-8-sig"),
        ("plain ascii and ünïcödé", "utf-8"),
    ],
)
def test_encodings_are_detected_so_the_text_reads_right(tmp_path: Path, text: str, encoding: str) -> None:
    path = tmp_path / "note.txt"
    path.write_bytes(text.encode(encoding))
    assert path.read_bytes().decode(detect_encoding(path)).lstrip("\ufeff") == text


def test_binary_with_a_text_extension_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "binary.txt"
    binary.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(Skipped, match="binary"):
        detect_encoding(binary)


def test_discovery_refuses_links_that_escape_the_folder(tmp_path: Path) -> None:
    inside = tmp_path / "docs"
    inside.mkdir()
    (inside / "note.txt").write_text("hello")
    (inside / ".hidden.txt").write_text("secret")
    outside = tmp_path / "private.txt"
    outside.write_text("do not read")
    (inside / "link.txt").symlink_to(outside)
    (inside / "alias.txt").symlink_to(inside / "note.txt")
    found, roots = discover([inside, tmp_path / "missing.md"])
    problems = {c.path.name: c.problem for c in found}
    assert roots == [inside.resolve()]
    assert problems["note.txt"] is None
    assert problems["alias.txt"] is None
    assert problems["link.txt"] is not None and "links outside" in problems["link.txt"]
    assert problems["missing.md"] == "not found"
    assert ".hidden.txt" not in problems
