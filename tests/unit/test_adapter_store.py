"""Trained adapters: one folder each, added whole or not at all, and a damaged record never offered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.adapters import (
    ADAPTER_FILE,
    MODEL_SCOPE,
    RECORD_FILE,
    AdapterRecord,
    AdapterStore,
    Attachment,
    check_name,
    choose_attachment,
    collection_scope,
    conversation_scope,
    describe_scope,
    scopes_for,
)
from models.shared.errors import AdapterError


def record(name: str, created_at: float = 100.0) -> AdapterRecord:
    return AdapterRecord(
        name=name,
        base_sha256="cd" * 32,
        base_name="Base 1B",
        data_label="facts.jsonl",
        settings="rank 8, alpha 16",
        steps=30,
        held_out_before=2.5,
        held_out_after=1.5,
        perplexity_before=12.0,
        perplexity_after=6.0,
        checked_on_training_data=False,
        created_at=created_at,
    )


@pytest.fixture
def adapter_file(tmp_path: Path) -> Path:
    path = tmp_path / "trained.gguf"
    path.write_bytes(b"GGUF adapter bytes")
    return path


@pytest.fixture
def store(tmp_path: Path) -> AdapterStore:
    return AdapterStore(tmp_path / "adapters")


def test_add_copies_the_file_and_writes_its_record(store: AdapterStore, adapter_file: Path) -> None:
    kept = store.add(adapter_file, record("facts"))
    folder = store.root / "facts"
    assert kept.folder == str(folder)
    assert kept.path == folder / ADAPTER_FILE
    assert kept.path.read_bytes() == b"GGUF adapter bytes"
    assert adapter_file.exists()  # copied, not moved
    saved = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
    assert saved["name"] == "facts"
    assert saved["perplexity_after"] == 6.0
    assert [p.name for p in store.root.iterdir()] == ["facts"]  # no ".facts.partial" left behind
    assert store.get("facts") == kept
    assert store.exists("facts")


def test_a_name_is_added_once(store: AdapterStore, adapter_file: Path) -> None:
    store.add(adapter_file, record("facts"))
    with pytest.raises(AdapterError, match="already exists") as caught:
        store.add(adapter_file, record("facts"))
    assert caught.value.remedy
    assert sorted(p.name for p in store.root.iterdir()) == ["facts"]


def test_all_is_oldest_first(store: AdapterStore, adapter_file: Path) -> None:
    assert store.all() == []  # no folder yet
    store.add(adapter_file, record("newer", created_at=200.0))
    store.add(adapter_file, record("older", created_at=50.0))
    assert [r.name for r in store.all()] == ["older", "newer"]


def test_an_unknown_name_lists_the_known_ones(store: AdapterStore, adapter_file: Path) -> None:
    with pytest.raises(AdapterError, match="none yet"):
        store.get("nothing")
    store.add(adapter_file, record("alpha"))
    store.add(adapter_file, record("beta"))
    with pytest.raises(AdapterError, match=r"no adapter named 'gamma' \(adapters: alpha, beta\)"):
        store.get("gamma")


def test_a_damaged_record_is_never_offered(store: AdapterStore, adapter_file: Path) -> None:
    store.add(adapter_file, record("good"))
    for name, text in [("broken", "{not json"), ("wrong", '{"name": "wrong"}'), ("list", "[1, 2]")]:
        (store.root / name).mkdir()
        (store.root / name / RECORD_FILE).write_text(text, encoding="utf-8")
    (store.root / "empty").mkdir()
    (store.root / "stray.txt").write_text("not a folder", encoding="utf-8")
    assert [r.name for r in store.all()] == ["good"]
    with pytest.raises(AdapterError, match="no adapter named 'broken'"):
        store.get("broken")


def test_remove_deletes_the_folder(store: AdapterStore, adapter_file: Path) -> None:
    store.add(adapter_file, record("gone"))
    store.add(adapter_file, record("stays"))
    removed = store.remove("gone")
    assert removed.name == "gone"
    assert not (store.root / "gone").exists()
    assert [r.name for r in store.all()] == ["stays"]
    with pytest.raises(AdapterError):
        store.remove("gone")


def test_a_failed_copy_leaves_nothing(store: AdapterStore, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        store.add(tmp_path / "missing.gguf", record("facts"))
    assert list(store.root.iterdir()) == []
    assert not store.exists("facts")


@pytest.mark.parametrize("name", ["my-adapter_1.0", "a", "9lives", "x" * 64])
def test_good_names(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "../x", "a b", "x" * 65, ".hidden", "-dash", "a/b", "naïve"])
def test_bad_names(name: str) -> None:
    with pytest.raises(AdapterError, match="cannot name an adapter") as caught:
        check_name(name)
    assert "64" in caught.value.remedy


def test_a_bad_name_is_refused_before_touching_the_disk(store: AdapterStore, adapter_file: Path) -> None:
    with pytest.raises(AdapterError):
        store.add(adapter_file, record("../escape"))
    with pytest.raises(AdapterError):
        store.get("../escape")
    assert not store.root.exists()


def test_a_trailing_newline_is_not_part_of_a_good_name() -> None:
    with pytest.raises(AdapterError):
        check_name("facts\n")


# --- where an adapter is attached: every answer, one collection's, one conversation's ---------------------------


def test_attachments_are_kept_per_scope_and_detached_one_at_a_time(store: AdapterStore, adapter_file: Path) -> None:
    store.add(adapter_file, record("tone"))
    store.add(adapter_file, record("facts"))
    everywhere = Attachment("tone", 1.0, "/models/base.gguf")
    for_manuals = Attachment("facts", 0.5, "/models/base.gguf", collection_scope("manuals"))
    store.attach(everywhere)
    store.attach(for_manuals)
    assert store.attachments() == {MODEL_SCOPE: everywhere, "collection:manuals": for_manuals}
    assert store.attached() == everywhere
    assert store.detach(collection_scope("manuals")) == for_manuals
    assert store.attachments() == {MODEL_SCOPE: everywhere}
    assert store.detach(collection_scope("manuals")) is None


def test_removing_an_adapter_detaches_it_everywhere_and_leaves_the_others(
    store: AdapterStore, adapter_file: Path
) -> None:
    store.add(adapter_file, record("tone"))
    store.add(adapter_file, record("facts"))
    store.attach(Attachment("facts", 1.0, "/m.gguf"))
    store.attach(Attachment("facts", 1.0, "/m.gguf", conversation_scope("c1")))
    kept = Attachment("tone", 1.0, "/m.gguf", collection_scope("notes"))
    store.attach(kept)
    store.remove("facts")
    assert store.attachments() == {"collection:notes": kept}


def test_an_attachment_from_before_scopes_is_read_as_every_answer_and_carried_over(
    store: AdapterStore, adapter_file: Path
) -> None:
    store.add(adapter_file, record("tone"))
    (store.root / "attached.json").write_text('{"name": "tone", "scale": 0.5, "base_path": "/m.gguf"}')
    assert store.attached() == Attachment("tone", 0.5, "/m.gguf")
    store.attach(Attachment("tone", 1.0, "/m.gguf", conversation_scope("c1")))
    assert not (store.root / "attached.json").exists()
    assert store.attachments()[MODEL_SCOPE] == Attachment("tone", 0.5, "/m.gguf")


def test_a_damaged_attachments_file_reads_as_nothing_attached(store: AdapterStore, adapter_file: Path) -> None:
    store.add(adapter_file, record("tone"))
    for text in ("{not json", '[{"name": "tone"}]', '"text"'):
        (store.root / "attachments.json").write_text(text)
        assert store.attachments() == {}
    with pytest.raises(AdapterError, match="no adapter named 'missing'"):
        store.attach(Attachment("missing", 1.0, "/m.gguf"))


def test_the_narrowest_scope_made_for_the_model_in_use_answers() -> None:
    tone = Attachment("tone", 1.0, "/m.gguf")
    facts = Attachment("facts", 1.0, "/m.gguf", collection_scope("manuals"))
    mine = Attachment("mine", 0.3, "/m.gguf", conversation_scope("c1"))
    elsewhere = Attachment("old", 1.0, "/other.gguf", conversation_scope("c2"))
    attached = {a.scope: a for a in (tone, facts, mine, elsewhere)}
    assert scopes_for("c1", "manuals") == ("conversation:c1", "collection:manuals", MODEL_SCOPE)
    assert choose_attachment(attached, scopes_for("c1", "manuals"), "/m.gguf") == mine
    assert choose_attachment(attached, scopes_for("c3", "manuals"), "/m.gguf") == facts
    assert choose_attachment(attached, scopes_for(None, None), "/m.gguf") == tone
    # Attached while another model ran: left aside, and the wider scope's adapter answers.
    assert choose_attachment(attached, scopes_for("c2", None), "/m.gguf") == tone
    assert choose_attachment(attached, scopes_for(None, None), "/other.gguf") is None


def test_scopes_in_words() -> None:
    assert describe_scope(MODEL_SCOPE) == "every answer"
    assert describe_scope(collection_scope("manuals")) == "the collection “manuals”"
    assert describe_scope(conversation_scope("c1"), {"c1": "Router reset"}) == "the conversation “Router reset”"
    assert describe_scope(conversation_scope("c9")) == "the conversation c9"
