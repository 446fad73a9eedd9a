"""Passages read once through the scheduler, on the real engine with the embedded model (one
slot, and two): the first answer that reads a passage keeps its cache; a later prompt holding the same passage joins it
instead of reading it; joined where it was read (after the same text), the answer is the one read there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.base import (
    CancelToken,
    ChatMessage,
    Finished,
    GenerationParams,
    LoadOptions,
    SavedCaches,
    TextDelta,
    Usage,
)
from backends.llamacpp.backend import LlamaCppBackend
from backends.llamacpp.caches.passage_store import KeptPassage
from backends.llamacpp.caches.saved_slots import SUFFIX
from models.gguf import ModelInfo
from rag.prompt import Source, rag_question, rag_system_prompt
from tests.integration.conftest import as_other

pytestmark = pytest.mark.integration

PASSAGES = {
    "tower.txt": (
        "The Eiffel Tower was finished in 1889 for the World's Fair in Paris. It is 330 metres tall and was the "
        "tallest man-made structure in the world for 41 years, until the Chrysler Building was finished."
    ),
    "everest.txt": (
        "Mount Everest is 8,849 metres high. Tenzing Norgay and Edmund Hillary first reached its summit on 29 May "
        "1953, coming up the south-east ridge from Nepal."
    ),
    "nile.txt": (
        "The Nile flows north for about 6,650 kilometres through eleven countries and ends in a delta on the "
        "Mediterranean Sea, north of Cairo."
    ),
}
GREEDY = GenerationParams(temperature=0.0, max_new_tokens=24, repeat_penalty=1.0)


def documents_chat(question: str, names: list[str]) -> tuple[list[ChatMessage], tuple[str, ...]]:
    sources = [Source(n, name, None, None, PASSAGES[name]) for n, name in enumerate(names, start=1)]
    messages = [ChatMessage("system", rag_system_prompt("")), ChatMessage("user", rag_question(question, sources))]
    return messages, tuple(PASSAGES[name] for name in names)


def ask(
    backend: LlamaCppBackend, question: str, names: list[str], keep: bool = True, recompute: float = 0.0
) -> tuple[str, Usage]:
    messages, passages = documents_chat(question, names)
    params = GenerationParams(
        **{**GREEDY.__dict__, "passages": passages if keep else (), "passage_recompute": recompute}
    )
    events = list(backend.stream_chat(messages, params, CancelToken()))
    assert isinstance(events[-1], Finished)
    usage = next(e for e in events if isinstance(e, Usage))
    return "".join(e.text for e in events if isinstance(e, TextDelta)), usage


@pytest.fixture
def one_slot(model_info: ModelInfo) -> Iterator[LlamaCppBackend]:
    backend = LlamaCppBackend()
    list(backend.load(model_info, LoadOptions(2048, threads=2, slots=1)))
    yield backend
    backend.close()


def passage_tokens(backend: LlamaCppBackend, names: list[str]) -> int:
    return sum(backend.count_tokens(" " + PASSAGES[name]) for name in names)


def test_passages_read_once_are_joined_when_a_later_question_holds_them(one_slot: LlamaCppBackend) -> None:
    names = ["tower.txt", "everest.txt", "nile.txt"]
    text, first = ask(one_slot, "When was the Eiffel Tower finished?", names)
    assert first.joined_tokens == 0 and text.strip()
    # Another question, the passages in another order: each is joined at another place than it was read.
    text, second = ask(one_slot, "Who first reached the summit of Everest?", ["nile.txt", "tower.txt", "everest.txt"])
    assert second.joined_tokens == passage_tokens(one_slot, names)
    assert text.strip()
    assert second.prompt_tokens - second.cached_tokens - second.joined_tokens < second.prompt_tokens / 3


def test_joined_after_the_same_text_the_answer_is_the_one_read(one_slot: LlamaCppBackend) -> None:
    names = ["everest.txt", "nile.txt", "tower.txt"]
    read_text, read = ask(one_slot, "How long is the Nile?", names)
    ask(one_slot, "How tall is the Eiffel Tower?", ["tower.txt"])  # the slot's cache now holds another prompt
    joined_text, joined = ask(one_slot, "How long is the Nile?", names)
    assert read.joined_tokens == 0 and joined.joined_tokens == passage_tokens(one_slot, names)
    assert joined_text == read_text != ""


def test_a_passage_whose_file_changed_is_read_again_and_the_others_joined(
    one_slot: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = ["everest.txt", "tower.txt", "nile.txt"]
    ask(one_slot, "How high is Mount Everest?", names)
    # The file was edited since: its passage holds other words, so its old cache is not what the prompt holds.
    monkeypatch.setitem(PASSAGES, "tower.txt", PASSAGES["tower.txt"].replace("330 metres", "330 metres (1,083 ft)"))
    ask(one_slot, "How long is the Nile?", ["nile.txt"])  # the slot's cache now holds another prompt
    _, after = ask(one_slot, "How high is Mount Everest?", names)
    assert after.joined_tokens == passage_tokens(one_slot, ["everest.txt", "nile.txt"])
    _, again = ask(one_slot, "When was the Eiffel Tower finished?", ["tower.txt", "nile.txt"])
    assert again.joined_tokens == passage_tokens(one_slot, ["tower.txt", "nile.txt"])  # the edited one, now kept


@pytest.mark.parametrize("kept_as", ["q8_0", "f16"])
def test_a_share_of_each_joined_passage_is_read_again(model_info: ModelInfo, kept_as: str) -> None:
    """The answer after joining is the one read where the kept caches hold f16 keys and values. At 8 bits (the
    default) the same share is read again and joined, but the joined answer may differ: on an AVX2-only EPYC the
    embedded model's greedy answer turned (the 8-bit figures are measured on real questions by
    ``hearth eval answers --keep-passages``, not asserted here)."""
    caches = SavedCaches("", 0, passages_type=kept_as)  # type: ignore[arg-type]
    one_slot = LlamaCppBackend()
    list(one_slot.load(model_info, LoadOptions(2048, threads=2, slots=1, saved_caches=caches)))
    try:
        _share_read_again(one_slot, exact=kept_as == "f16")
    finally:
        one_slot.close()


def _share_read_again(one_slot: LlamaCppBackend, exact: bool) -> None:
    names = ["everest.txt", "nile.txt", "tower.txt"]
    read_text, read = ask(one_slot, "How long is the Nile?", names, recompute=0.25)
    ask(one_slot, "How tall is the Eiffel Tower?", ["tower.txt"])  # the slot's cache now holds another prompt
    # After the same text, the first quarter of each passage read again and the rest joined.
    joined_text, joined = ask(one_slot, "How long is the Nile?", names, recompute=0.25)
    lengths = [passage_tokens(one_slot, [name]) for name in names]
    assert read.joined_tokens == 0
    assert joined.joined_tokens == sum(n - round(n * 0.25) for n in lengths)
    assert joined_text.strip()
    if exact:
        assert joined_text == read_text != ""
    # In another order, a share of 1 reads every passage: nothing is joined.
    _, whole = ask(one_slot, "Who first reached the summit of Everest?", names[::-1], recompute=1.0)
    assert whole.joined_tokens == 0
    _, most = ask(one_slot, "Who first reached the summit of Everest?", names[1:], recompute=0.5)
    assert most.joined_tokens == sum(n - round(n * 0.5) for n in lengths[1:])


def test_with_several_slots_passages_are_joined_too_and_without_names_nothing_is(model_info: ModelInfo) -> None:
    backend = LlamaCppBackend()
    list(backend.load(model_info, LoadOptions(1024, threads=2, slots=2)))
    try:
        names = ["tower.txt", "nile.txt"]
        ask(backend, "How long is the Nile?", names)
        _, usage = ask(backend, "When was the Eiffel Tower finished?", names[::-1])
        assert usage.joined_tokens > 0  # each slot a KV stream of its own: the kept cache travels as bytes
    finally:
        backend.close()
    backend = LlamaCppBackend()
    list(backend.load(model_info, LoadOptions(1024, threads=2, slots=1)))
    try:
        ask(backend, "How long is the Nile?", names, keep=False)
        _, usage = ask(backend, "When was the Eiffel Tower finished?", names[::-1])
        assert usage.joined_tokens == 0  # nothing was kept: the first answer named no passages
    finally:
        backend.close()


def test_a_kept_cache_llama_cpp_refuses_is_dropped_and_the_passage_read(one_slot: LlamaCppBackend) -> None:
    names = ["nile.txt", "everest.txt"]
    ask(one_slot, "How high is Mount Everest?", names)
    scheduler = one_slot._scheduler
    assert scheduler is not None
    store = scheduler._joiner.store
    assert len(store) == 2
    for key, kept in list(store._kept.items()):
        store._kept[key] = KeptPassage(b"not a state" + kept.state[11:100], kept.computed_at)
    ask(one_slot, "How long is the Nile?", ["tower.txt"])  # the slot's cache now holds another prompt
    text, usage = ask(one_slot, "How high is Mount Everest?", names)
    assert usage.joined_tokens == 0 and text.strip()
    # Read again, they were kept again, and those caches join.
    assert len(store) == 2 and all(not kept.state.startswith(b"not a state") for kept in store._kept.values())
    _, again = ask(one_slot, "Where does the Nile end?", names[::-1])
    assert again.joined_tokens == passage_tokens(one_slot, names)


def _with_shelf(model_info: ModelInfo, folder: Path) -> LlamaCppBackend:
    """One slot, its kept passage caches also on disk in ``folder`` (conversation caches off)."""
    backend = LlamaCppBackend()
    caches = SavedCaches("", 0, str(folder), 64 << 20)
    list(backend.load(model_info, LoadOptions(2048, threads=2, slots=1, saved_caches=caches)))
    return backend


def test_passages_kept_on_disk_are_joined_after_a_restart_and_a_damaged_one_is_read(
    model_info: ModelInfo, tmp_path: Path
) -> None:
    names = ["tower.txt", "everest.txt"]
    folder = tmp_path / "passages"
    before = _with_shelf(model_info, folder)
    try:
        read_text, read = ask(before, "When was the Eiffel Tower finished?", names)
    finally:
        before.close()
    kept = sorted(folder.glob(f"*/*{SUFFIX}"))
    assert read.joined_tokens == 0 and len(kept) == 2  # one file per passage
    after = _with_shelf(model_info, folder)  # a new engine: nothing in memory
    try:
        joined_text, joined = ask(after, "When was the Eiffel Tower finished?", names)
        assert joined.joined_tokens == passage_tokens(after, names)
        assert joined_text == read_text != ""  # joined where it was read, after the same text: the same answer
    finally:
        after.close()
    for path in kept:  # a byte of each changed on disk: checked, deleted, and the passages read again
        data = bytearray(path.read_bytes())
        data[-7] ^= 0xFF
        path.write_bytes(bytes(data))
    damaged = _with_shelf(model_info, folder)
    try:
        text, usage = ask(damaged, "When was the Eiffel Tower finished?", names)
        assert usage.joined_tokens == 0 and text == read_text
        assert {p.name for p in folder.glob(f"*/*{SUFFIX}")} == {p.name for p in kept}  # read, then kept again
    finally:
        damaged.close()


def test_another_account_cannot_read_the_kept_passages(
    model_info: ModelInfo, other_account: tuple[int, int], open_folder: Path
) -> None:
    folder = open_folder / "passages"
    backend = _with_shelf(model_info, folder)
    try:
        ask(backend, "How long is the Nile?", ["nile.txt"])
    finally:
        backend.close()
    (kept,) = folder.glob(f"*/*{SUFFIX}")
    listed = as_other(other_account, "/bin/ls", str(kept.parent))
    read = as_other(other_account, "/bin/cat", str(kept))
    assert listed.returncode != 0 and "Permission denied" in listed.stderr
    assert read.returncode != 0 and "Permission denied" in read.stderr
