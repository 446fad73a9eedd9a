"""Conversation caches saved to disk and loaded again, on the real embedded SmolLM2 GGUF: a
follow-up after a restart, or after another conversation took the slot, reads only what is new and writes the same
greedy answer as a follow-up whose conversation never left memory; a damaged file is read again, never loaded."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from backends.base import CancelToken, ChatMessage, GenerationParams, LoadOptions, SavedCaches, TextDelta, Usage
from backends.llamacpp.backend import LlamaCppBackend
from backends.llamacpp.caches.saved_slots import SUFFIX, forget_owner, owner_tag
from models.gguf import ModelInfo
from tests.integration.conftest import as_other

pytestmark = pytest.mark.integration

GREEDY = GenerationParams(temperature=0.0, max_new_tokens=24, repeat_penalty=1.0)
SYSTEM = ChatMessage("system", "You are a helpful assistant. Answer in one or two sentences.")
FIRST = [
    SYSTEM,
    ChatMessage(
        "user",
        "My garden has three raised beds. The first gets sun all morning, the second is shaded by a pear tree "
        "after noon, and the third sits by the south wall where it is warm until evening. I want to grow "
        "tomatoes, lettuce and mint this year. Which bed should the tomatoes go in?",
    ),
]
FOLLOW_UP = "And the lettuce?"
OTHER = [SYSTEM, ChatMessage("user", "Write a short poem about the sea, the wind and a lighthouse at night.")]


def load(model_info: ModelInfo, folder: Path | None) -> LlamaCppBackend:
    backend = LlamaCppBackend()
    options = LoadOptions(
        context_length=2048,
        threads=2,
        seed=7,
        saved_caches=SavedCaches(str(folder), 256 << 20) if folder is not None else None,
    )
    list(backend.load(model_info, options))
    return backend


def answer(backend: LlamaCppBackend, messages: list[ChatMessage], owner: str = "") -> tuple[str, Usage]:
    events = list(backend.stream_chat(messages, replace(GREEDY, cache_owner=owner), CancelToken()))
    usage = next(e for e in events if isinstance(e, Usage))
    return "".join(e.text for e in events if isinstance(e, TextDelta)), usage


def answers(model_info: ModelInfo, folder: Path | None, *conversations: list[ChatMessage]) -> list[tuple[str, Usage]]:
    """Each conversation answered in turn by one freshly loaded model, which then stops (a clean stop saves)."""
    backend = load(model_info, folder)
    try:
        return [answer(backend, conversation) for conversation in conversations]
    finally:
        backend.close()


def follow_up(first_answer: str) -> list[ChatMessage]:
    return [*FIRST, ChatMessage("assistant", first_answer), ChatMessage("user", FOLLOW_UP)]


@pytest.fixture(scope="module")
def kept_in_memory(model_info: ModelInfo) -> Iterator[tuple[str, str, Usage]]:
    """The first answer, and the follow-up's answer and usage when the conversation stayed in its slot."""
    backend = load(model_info, None)
    try:
        first, _ = answer(backend, FIRST)
        second, usage = answer(backend, follow_up(first))
    finally:
        backend.close()
    assert usage.cached_tokens > 64  # the conversation so far came from the slot's cache
    yield first, second, usage


@pytest.fixture(scope="module")
def read_whole(model_info: ModelInfo, kept_in_memory: tuple[str, str, Usage]) -> str:
    """The follow-up's answer when a fresh model reads the whole conversation (llama.cpp's kernels may round a
    long piece otherwise than the short one after a cache, so this can differ from the answer above in a near tie)."""
    return answers(model_info, None, follow_up(kept_in_memory[0]))[0][0]


def saved_files(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"*/*{SUFFIX}"))


def test_a_follow_up_after_a_restart_reads_only_what_is_new_and_writes_the_same_answer(
    model_info: ModelInfo, kept_in_memory: tuple[str, str, Usage], tmp_path: Path
) -> None:
    first_answer, second_answer, in_memory = kept_in_memory
    folder = tmp_path / "saved"
    assert answers(model_info, folder, FIRST)[0][0] == first_answer  # its clean stop saves the slot
    files = saved_files(folder)
    assert len(files) == 1
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE(files[0].parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600

    ((text, usage),) = answers(model_info, folder, follow_up(first_answer))
    assert (text, usage.cached_tokens) == (second_answer, in_memory.cached_tokens)
    assert len(saved_files(folder)) == 1  # the longer conversation replaced the shorter one it holds


def test_a_conversation_whose_slot_went_to_another_comes_back_from_its_saved_cache(
    model_info: ModelInfo, kept_in_memory: tuple[str, str, Usage], tmp_path: Path
) -> None:
    first_answer, second_answer, in_memory = kept_in_memory
    # Between the two turns the only slot takes another conversation.
    *_, (_, read_again) = answers(model_info, None, FIRST, OTHER, follow_up(first_answer))
    *_, (text, usage) = answers(model_info, tmp_path / "saved", FIRST, OTHER, follow_up(first_answer))
    assert read_again.cached_tokens < 64  # without saving, only the shared system prompt was left
    assert (text, usage.cached_tokens) == (second_answer, in_memory.cached_tokens)


def test_a_damaged_cache_is_deleted_and_the_prompt_read_again(
    model_info: ModelInfo, kept_in_memory: tuple[str, str, Usage], read_whole: str, tmp_path: Path
) -> None:
    first_answer = kept_in_memory[0]
    folder = tmp_path / "saved"
    answers(model_info, folder, FIRST)
    (damaged,) = saved_files(folder)
    data = bytearray(damaged.read_bytes())
    data[-100] ^= 0x01  # one bit of the keys and values
    damaged.write_bytes(bytes(data))

    ((text, usage),) = answers(model_info, folder, follow_up(first_answer))
    assert usage.cached_tokens == 0 and text == read_whole
    assert not damaged.exists()


def test_a_deleted_conversations_caches_are_dropped_and_never_saved(model_info: ModelInfo, tmp_path: Path) -> None:
    folder = tmp_path / "saved"
    backend = load(model_info, folder)
    try:
        answer(backend, FIRST, owner="kept")
        answer(backend, OTHER, owner="deleted")  # the first is saved as this one takes the only slot
        # A save of the deleted conversation that was under way as Hearth deleted its files, written after them:
        late = next(folder.iterdir()) / f"{owner_tag('deleted')}-late{SUFFIX}"
        late.write_bytes(b"written after the deletion")
        backend.forget_owner("deleted")
        _, usage = answer(backend, OTHER, owner="another")
        assert usage.cached_tokens == 0  # its slot's cache was dropped, not only left unsaved
        assert not late.exists()  # the engine deletes its files too, on the thread that saves them
    finally:
        backend.close()
    owners = sorted(path.name.split("-", 1)[0] for path in saved_files(folder))
    assert owners == sorted([owner_tag("kept"), owner_tag("another")])
    assert forget_owner(folder, "kept") == 1
    assert [path.name.split("-", 1)[0] for path in saved_files(folder)] == [owner_tag("another")]


def test_another_account_cannot_read_the_saved_caches(
    model_info: ModelInfo, other_account: tuple[int, int], open_folder: Path
) -> None:
    folder = open_folder / "saved"
    backend = load(model_info, folder)
    try:
        answer(backend, FIRST)
    finally:
        backend.close()
    (saved,) = saved_files(folder)
    listed = as_other(other_account, "/bin/ls", str(saved.parent))
    read = as_other(other_account, "/bin/cat", str(saved))
    assert listed.returncode != 0 and "Permission denied" in listed.stderr
    assert read.returncode != 0 and "Permission denied" in read.stderr
