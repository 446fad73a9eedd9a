"""A deterministic backend for unit tests and demo mode (``HEARTH_BACKEND__NAME=fake``).

It answers by echoing the last user message, one word per token, so tests know exactly what to expect.
Tokens are whitespace-separated words, which keeps token counting predictable.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, ClassVar

from backends.base import (
    Availability,
    Backend,
    BackendChoice,
    CancelToken,
    Capabilities,
    ChatEvent,
    ChatMessage,
    Finished,
    FinishReason,
    GenerationParams,
    LoadOptions,
    LoadProgress,
    Support,
    TextDelta,
    Usage,
)
from backends.memory import MemoryEstimate
from backends.placement import RANK_CPU, cpu_option
from backends.plan import PlanContext, PlanOption
from backends.stops import StopScanner
from models.shared.errors import ContextTooLong, ModelNotReady

if TYPE_CHECKING:
    from backends.hardware import HardwareInventory
    from models.gguf import ModelInfo


class FakeBackend(Backend):
    name: ClassVar[str] = "fake"
    label: ClassVar[str] = "demo (fake model)"
    capabilities: ClassVar[Capabilities] = Capabilities(
        streaming=True, lora_hot_swap=False, multi_device=False, embeddings=False, parallel=True
    )
    choices: ClassVar[tuple[BackendChoice, ...]] = (BackendChoice("fake", "Demo (no model: echoes the question)"),)

    def __init__(self, token_delay_s: float = 0.0, reply_prefix: str = "You said:") -> None:
        self.token_delay_s = token_delay_s
        self.reply_prefix = reply_prefix
        self._context_length = 0
        self._slots = 1
        self.closed = False

    @classmethod
    def availability(cls, inventory: HardwareInventory) -> Availability:
        return Availability(True, "the demo backend runs anywhere")

    @classmethod
    def supports(cls, model: ModelInfo) -> Support:
        return Support(True, "the demo backend ignores the model's weights")

    @classmethod
    def estimate_memory(cls, model: ModelInfo, options: LoadOptions) -> MemoryEstimate:
        return MemoryEstimate(0, 0, 0)

    @classmethod
    def propose(cls, ctx: PlanContext) -> list[PlanOption]:
        return cpu_option(ctx, cls, RANK_CPU, "")

    @property
    def context_length(self) -> int:
        return self._context_length

    @property
    def slots(self) -> int:
        return self._slots

    def load(self, model: ModelInfo | None, options: LoadOptions) -> Iterator[LoadProgress]:
        self._context_length = options.context_length
        self._slots = options.slots
        self.closed = False
        yield LoadProgress(1.0, "Demo model ready")

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        # One token of framing per message plus one for the generation prompt, like a real template.
        return sum(self.count_tokens(m.content) + 1 for m in messages) + 1

    def stream_chat(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]:
        last_user = next((m.content for m in reversed(messages) if m.role == "user"), "")
        return self._stream(
            [*self.reply_prefix.split(), *last_user.split()], self.count_chat_tokens(messages), params, cancel
        )

    def stream_completion(self, prompt: str, params: GenerationParams, cancel: CancelToken) -> Iterator[ChatEvent]:
        """Continues a prompt by echoing it, so tests know the text exactly."""
        return self._stream(prompt.split(), self.count_tokens(prompt) + 1, params, cancel)

    def _stream(
        self, words: list[str], prompt_tokens: int, params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]:
        if not self._context_length:
            raise ModelNotReady("No model is loaded.", "Load a model first.")
        started = time.perf_counter()
        if prompt_tokens >= self._context_length:
            raise ContextTooLong(
                f"The prompt is {prompt_tokens} tokens; the context window holds {self._context_length}.",
                "Shorten the message.",
            )
        budget = min(params.max_new_tokens, self._context_length - prompt_tokens)
        stops = StopScanner(params.stop)
        reason: FinishReason = "stop"
        produced = 0
        first_at: float | None = None
        for index, word in enumerate(words):
            if produced >= budget:
                reason = "length"
                break
            if cancel.cancelled:
                reason = "cancelled"
                break
            if self.token_delay_s:
                time.sleep(self.token_delay_s)
            first_at = first_at or time.perf_counter()
            produced += 1
            text = stops.feed(word if index == 0 else f" {word}")
            if text:
                yield TextDelta(text)
            if stops.stopped:
                break
        if tail := stops.flush():
            yield TextDelta(tail)
        done = time.perf_counter()
        yield Usage(prompt_tokens, produced, ((first_at or done) - started) * 1000, (done - started) * 1000)
        yield Finished(reason)

    def close(self) -> None:
        self._context_length = 0
        self.closed = True
