"""Chat: store the question, fit the history, stream the answer, store the answer.

The service yields the backend's typed events, framed by :class:`TurnStarted` and :class:`TurnSaved`; turning
them into text on a screen is the caller's job (``app/ui`` accumulates them for Gradio, the CLI prints them).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from app.errors import EmptyMessage, HearthError
from app.services.conversations import AnswerStats, ConversationStore, StoredMessage
from app.services.history import fit_history, prompt_budget
from app.services.runtime import ModelRuntime
from backends.base import CancelToken, ChatEvent, ChatMessage, Finished, GenerationParams, TextDelta, Usage


@dataclass(frozen=True)
class TurnStarted:
    conversation_id: str
    dropped_messages: int
    prompt_tokens: int


@dataclass(frozen=True)
class TurnSaved:
    message: StoredMessage


TurnEvent = TurnStarted | ChatEvent | TurnSaved


class ChatService:
    def __init__(self, store: ConversationStore, runtime: ModelRuntime) -> None:
        self._store = store
        self._runtime = runtime
        self._cancel = CancelToken()
        self._cancel_lock = threading.Lock()

    def stop(self) -> None:
        """Stop the answer being generated, if any; what was written so far is kept."""
        with self._cancel_lock:
            self._cancel.cancel()

    def send(
        self, conversation_id: str | None, text: str, params: GenerationParams, system_prompt: str
    ) -> Iterator[TurnEvent]:
        if not text.strip():
            raise EmptyMessage("There is nothing to send.", "Type a question first.")
        self._runtime.backend()
        conversation = self._store.get(conversation_id) if conversation_id else None
        earlier = _as_messages(system_prompt, conversation.messages if conversation else ())
        # Fit before storing: a question too long for the model must not land in the conversation.
        prompt = self._fit([*earlier, ChatMessage("user", text)], params)
        if conversation is None:
            conversation = self._store.create(system_prompt)
        elif conversation.system_prompt != system_prompt:
            self._store.set_system_prompt(conversation.id, system_prompt)
        self._store.append(conversation.id, "user", text)
        yield from self._answer(conversation.id, prompt, params)

    def regenerate(self, conversation_id: str, params: GenerationParams, system_prompt: str) -> Iterator[TurnEvent]:
        self._runtime.backend()
        conversation = self._store.get(conversation_id)
        stored = list(conversation.messages)
        if stored and stored[-1].role == "assistant":
            stored.pop()
        if not stored:
            raise EmptyMessage("There is no question to answer again.", "Send a message first.")
        prompt = self._fit(_as_messages(system_prompt, stored), params)
        if conversation.system_prompt != system_prompt:
            self._store.set_system_prompt(conversation.id, system_prompt)
        self._store.delete_trailing_assistant(conversation.id)
        yield from self._answer(conversation.id, prompt, params)

    def _fit(self, history: list[ChatMessage], params: GenerationParams) -> tuple[list[ChatMessage], int, int]:
        backend = self._runtime.backend()
        budget = prompt_budget(backend.context_length, params.max_new_tokens)
        fitted = fit_history(history, budget, backend.count_chat_tokens)
        return list(fitted.messages), fitted.dropped, fitted.prompt_tokens

    def _answer(
        self, conversation_id: str, prompt: tuple[list[ChatMessage], int, int], params: GenerationParams
    ) -> Iterator[TurnEvent]:
        messages, dropped, prompt_tokens = prompt
        cancel = CancelToken()
        with self._cancel_lock:
            self._cancel = cancel
        yield TurnStarted(conversation_id, dropped, prompt_tokens)
        parts: list[str] = []
        usage: Usage | None = None
        reason = "cancelled"  # if the consumer walks away mid-answer, keep what was written as cancelled
        try:
            for event in self._runtime.backend().stream_chat(messages, params, cancel):
                if isinstance(event, TextDelta):
                    parts.append(event.text)
                elif isinstance(event, Usage):
                    usage = event
                elif isinstance(event, Finished):
                    reason = event.reason
                yield event
        except HearthError:
            reason = "error"
            raise
        finally:
            saved = self._save(conversation_id, "".join(parts), usage, reason, dropped)
        if saved is not None:
            yield TurnSaved(saved)

    def _save(
        self, conversation_id: str, text: str, usage: Usage | None, reason: str, dropped: int
    ) -> StoredMessage | None:
        if not text and reason != "stop":
            return None
        stats = AnswerStats(
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            time_to_first_token_ms=usage.time_to_first_token_ms if usage else 0.0,
            decode_tokens_per_s=usage.decode_tokens_per_s if usage else 0.0,
            finish_reason=reason,
            dropped_messages=dropped,
        )
        return self._store.append(conversation_id, "assistant", text, stats)


def _as_messages(system_prompt: str, stored: Sequence[StoredMessage]) -> list[ChatMessage]:
    system = [ChatMessage("system", system_prompt)] if system_prompt.strip() else []
    return [*system, *(ChatMessage(m.role, m.content) for m in stored)]
