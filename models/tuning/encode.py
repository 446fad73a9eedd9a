"""Examples to token ids, with the loss only where the model should learn to write.

A chat is rendered with the model's own chat template (the same sandboxed renderer chat uses) and tokenized
piece by piece: what comes before each assistant turn, generation prompt included, then the turn itself. So the
prompt tokens are exactly those the model reads at inference, and the answer tokens (its end-of-turn token
included) are those it learns to write; only the latter carry loss. Plain text carries loss everywhere and is
cut into windows of the run's max length.

Pure: the renderer and the tokenizer are passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from models.shared.chat import ChatMessage
from models.shared.errors import TrainingDataError
from models.tuning.dataset import ChatExample, Example, TextExample

IGNORE = -100  # the label value the loss skips (PyTorch's cross-entropy default)

Render = Callable[[Sequence[ChatMessage], bool], str]  # (messages, add_generation_prompt) -> prompt text
Tokenize = Callable[[str, bool], list[int]]  # (text, add the model's BOS) -> ids, special-token text parsed


@dataclass(frozen=True)
class Encoded:
    input_ids: tuple[int, ...]
    labels: tuple[int, ...]  # IGNORE where there is no loss

    @property
    def trained_tokens(self) -> int:
        return sum(1 for label in self.labels if label != IGNORE)


@dataclass(frozen=True)
class EncodedSet:
    items: tuple[Encoded, ...]
    cut: int  # examples longer than the max length, cut to it
    dropped: int  # examples with nothing left to learn once cut (their prompt alone fills the max length)

    @property
    def tokens(self) -> int:
        return sum(len(item.input_ids) for item in self.items)

    @property
    def trained_tokens(self) -> int:
        return sum(item.trained_tokens for item in self.items)

    @property
    def longest(self) -> int:
        return max((len(item.input_ids) for item in self.items), default=0)


def encode_all(
    examples: Sequence[Example], render: Render, tokenize: Tokenize, bos_text: str, max_length: int
) -> EncodedSet:
    items: list[Encoded] = []
    cut = dropped = 0
    for example in examples:
        if isinstance(example, TextExample):
            windows = encode_text(example.text, tokenize, bos_text, max_length)
            cut += len(windows) > 1
            items.extend(windows)
            continue
        encoded, was_cut = encode_chat(example, render, tokenize, bos_text, max_length)
        cut += was_cut
        if encoded.trained_tokens == 0:
            dropped += 1
        else:
            items.append(encoded)
    return EncodedSet(tuple(items), cut, dropped)


def encode_chat(
    example: ChatExample, render: Render, tokenize: Tokenize, bos_text: str, max_length: int
) -> tuple[Encoded, bool]:
    messages = example.messages
    ids: list[int] = []
    labels: list[int] = []
    done = ""

    def add(text: str, learn: bool) -> None:
        if not text:
            return
        pieces = tokenize(text, not ids and not (bos_text and text.startswith(bos_text)))
        ids.extend(pieces)
        labels.extend(pieces if learn else [IGNORE] * len(pieces))

    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        before = render(messages[:index], True)
        through = render(messages[: index + 1], False)
        if not (before.startswith(done) and through.startswith(before)):
            raise TrainingDataError(
                "This model's chat template rewrites earlier turns of a conversation, so answers cannot be told "
                "apart from prompts.",
                'Train this model on {"text": ...} examples, or tune another model.',
            )
        add(before[len(done) :], learn=False)
        add(through[len(before) :], learn=True)
        done = through
    add(render(messages, False)[len(done) :], learn=False)
    was_cut = len(ids) > max_length
    return Encoded(tuple(ids[:max_length]), tuple(labels[:max_length])), was_cut


def encode_text(text: str, tokenize: Tokenize, bos_text: str, max_length: int) -> list[Encoded]:
    ids = tokenize(text, not (bos_text and text.startswith(bos_text)))
    windows = [tuple(ids[start : start + max_length]) for start in range(0, len(ids), max_length)]
    # A last window of one token has nothing to predict from; it is dropped.
    return [Encoded(window, window) for window in windows if len(window) > 1]
