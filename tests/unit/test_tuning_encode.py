"""Examples become token ids with the loss on the assistant's turns only, end-of-turn text included."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from backends.base import ChatMessage, Role
from models.shared.errors import TrainingDataError
from models.tuning.dataset import ChatExample, Example, TextExample
from models.tuning.encode import IGNORE, Encoded, EncodedSet, encode_all, encode_chat, encode_text

BOS = 1
END = "<|im_end|>\n"


def chatml(messages: Sequence[ChatMessage], add_generation_prompt: bool) -> str:
    text = "".join(f"<|im_start|>{m.role}\n{m.content}{END}" for m in messages)
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


class CharTokenizer:
    """One id per character (its code point), BOS as id 1; remembers each call's BOS flag."""

    def __init__(self) -> None:
        self.bos_flags: list[bool] = []

    def __call__(self, text: str, add_bos: bool) -> list[int]:
        self.bos_flags.append(add_bos)
        return ([BOS] if add_bos else []) + [ord(c) for c in text]


def ids(text: str) -> list[int]:
    return [ord(c) for c in text]


def chat(*pairs: tuple[Role, str]) -> ChatExample:
    return ChatExample(tuple(ChatMessage(role, content) for role, content in pairs))


def learned_text(encoded: Encoded) -> str:
    return "".join(chr(label) for label in encoded.labels if label != IGNORE)


def test_only_the_answer_and_its_end_of_turn_carry_loss() -> None:
    example = chat(("user", "hi"), ("assistant", "yo"))
    encoded, was_cut = encode_chat(example, chatml, CharTokenizer(), "", 512)
    prompt = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    answer = "yo" + END
    assert not was_cut
    assert list(encoded.input_ids) == [BOS, *ids(prompt), *ids(answer)]
    assert list(encoded.labels) == [IGNORE] * (1 + len(prompt)) + ids(answer)
    assert encoded.trained_tokens == len(answer)


def test_every_assistant_turn_of_a_chat_is_learned() -> None:
    example = chat(("system", "S"), ("user", "a"), ("assistant", "one"), ("user", "b"), ("assistant", "two"))
    encoded, _ = encode_chat(example, chatml, CharTokenizer(), "", 512)
    assert list(encoded.input_ids) == [BOS, *ids(chatml(example.messages, False))]
    assert learned_text(encoded) == "one" + END + "two" + END
    assert len(encoded.labels) == len(encoded.input_ids)
    # The second user turn sits between the answers without loss.
    second_user = "<|im_start|>user\nb" + END
    start = 1 + len(chatml(example.messages[:3], False))
    assert set(encoded.labels[start : start + len(second_user)]) == {IGNORE}


def test_turns_after_the_last_answer_are_kept_without_loss() -> None:
    example = chat(("user", "a"), ("assistant", "one"), ("user", "more?"))
    encoded, _ = encode_chat(example, chatml, CharTokenizer(), "", 512)
    assert list(encoded.input_ids) == [BOS, *ids(chatml(example.messages, False))]
    assert learned_text(encoded) == "one" + END
    assert encoded.labels[-1] == IGNORE


def test_a_long_chat_is_cut_to_the_max_length() -> None:
    example = chat(("user", "q"), ("assistant", "a long answer that will not fit"))
    full, was_cut = encode_chat(example, chatml, CharTokenizer(), "", 10_000)
    assert not was_cut
    prompt_tokens = 1 + len(chatml(example.messages[:1], True))
    limit = prompt_tokens + 5
    cut, was_cut = encode_chat(example, chatml, CharTokenizer(), "", limit)
    assert was_cut
    assert cut.input_ids == full.input_ids[:limit]
    assert cut.labels == full.labels[:limit]
    assert cut.trained_tokens == 5
    result = encode_all([example], chatml, CharTokenizer(), "", limit)
    assert (result.cut, result.dropped, len(result.items)) == (1, 0, 1)


def test_a_chat_whose_prompt_fills_the_max_length_is_dropped() -> None:
    example = chat(("user", "a question longer than the limit"), ("assistant", "a"))
    kept = chat(("user", "q"), ("assistant", "a"))
    prompt_tokens = 1 + len(chatml(example.messages[:1], True))
    result = encode_all([example, kept], chatml, CharTokenizer(), "", prompt_tokens)
    assert result.dropped == 1
    assert len(result.items) == 1
    assert learned_text(result.items[0]) == "a" + END


def test_a_template_that_rewrites_earlier_turns_is_refused() -> None:
    def forgets_thinking(messages: Sequence[ChatMessage], add_generation_prompt: bool) -> str:
        # Like Qwen3's: an assistant turn's <think> part is shown only while it is the last message.
        shown = [
            ChatMessage(m.role, m.content.split("</think>")[-1])
            if m.role == "assistant" and m is not messages[-1]
            else m
            for m in messages
        ]
        return chatml(shown, add_generation_prompt)

    example = chat(("user", "a"), ("assistant", "<think>hm</think>b"), ("user", "c"), ("assistant", "d"))
    with pytest.raises(TrainingDataError, match="rewrites earlier turns") as caught:
        encode_chat(example, forgets_thinking, CharTokenizer(), "", 512)
    assert '{"text"' in caught.value.remedy


def test_a_generation_prompt_the_answer_does_not_continue_is_refused() -> None:
    def mismatched(messages: Sequence[ChatMessage], add_generation_prompt: bool) -> str:
        return chatml(messages, False) + ("<|assistant|>" if add_generation_prompt else "")

    with pytest.raises(TrainingDataError):
        encode_chat(chat(("user", "a"), ("assistant", "b")), mismatched, CharTokenizer(), "", 512)


def test_bos_is_added_once_at_the_start() -> None:
    tokenize = CharTokenizer()
    encoded, _ = encode_chat(chat(("user", "a"), ("assistant", "b")), chatml, tokenize, "<s>", 512)
    assert tokenize.bos_flags == [True, False]
    assert encoded.input_ids.count(BOS) == 1
    assert encoded.input_ids[0] == BOS


def test_bos_is_not_added_when_the_template_writes_it() -> None:
    def with_bos(messages: Sequence[ChatMessage], add_generation_prompt: bool) -> str:
        return "<s>" + chatml(messages, add_generation_prompt)

    tokenize = CharTokenizer()
    encoded, _ = encode_chat(chat(("user", "a"), ("assistant", "b")), with_bos, tokenize, "<s>", 512)
    assert tokenize.bos_flags == [False, False]
    assert BOS not in encoded.input_ids
    assert encoded.input_ids[:3] == tuple(ids("<s>"))


def test_text_is_cut_into_windows_and_a_last_lone_token_is_dropped() -> None:
    # 8 characters and BOS: windows of 4, 4 and 1; the last has nothing to predict.
    windows = encode_text("abcdefgh", CharTokenizer(), "<s>", 4)
    assert [list(w.input_ids) for w in windows] == [[BOS, *ids("abc")], ids("defg")]
    assert all(w.labels == w.input_ids for w in windows)
    windows = encode_text("abcdefghi", CharTokenizer(), "<s>", 4)
    assert [len(w.input_ids) for w in windows] == [4, 4, 2]


def test_text_that_starts_with_bos_text_gets_no_bos() -> None:
    tokenize = CharTokenizer()
    windows = encode_text("<s>hello", tokenize, "<s>", 100)
    assert tokenize.bos_flags == [False]
    assert list(windows[0].input_ids) == ids("<s>hello")


def test_a_set_counts_its_tokens() -> None:
    examples: list[Example] = [
        TextExample("abcdefghij"),  # 11 ids with BOS: windows 4, 4, 3, all learned
        TextExample("xy"),  # 3 ids with BOS: one window
    ]
    result = encode_all(examples, chatml, CharTokenizer(), "", 4)
    assert result.cut == 1  # only the first needed several windows
    assert result.dropped == 0
    assert [len(item.input_ids) for item in result.items] == [4, 4, 3, 3]
    assert result.tokens == 14
    assert result.trained_tokens == 14
    assert result.longest == 4


def test_set_properties() -> None:
    items = (
        Encoded((1, 2, 3), (IGNORE, 2, 3)),
        Encoded((4, 5, 6, 7, 8), (IGNORE, IGNORE, IGNORE, IGNORE, 8)),
    )
    encoded = EncodedSet(items, cut=0, dropped=0)
    assert encoded.tokens == 8
    assert encoded.trained_tokens == 3
    assert encoded.longest == 5
    assert EncodedSet((), 0, 0).longest == 0
