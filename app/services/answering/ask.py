"""``hearth ask``: one question answered from a collection, with no conversation around it. The prompt is built
and the answer finished by the turn builder the page and the API use (``documents_turn``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from app.services.answering.documents_turn import DocumentsQuestion, FinalAnswer, documents_turn, streamed_answer
from app.services.answering.sources import FoundSources
from app.services.library.documents import DocumentServices
from app.services.serving.runtime import ModelRuntime
from backends.base import CancelToken, ChatEvent, GenerationParams
from models.shared.errors import EmptyMessage


@dataclass(frozen=True)
class AskStarted:
    found: FoundSources
    prompt_tokens: int


@dataclass(frozen=True)
class AskFinished:
    """The answer as kept, after the stream: named if it only pointed at a passage, its citations checked."""

    answer: FinalAnswer


def ask(
    documents: DocumentServices,
    runtime: ModelRuntime,
    collection: str,
    question: str,
    params: GenerationParams,
    top_k: int = 5,
    cancel: CancelToken | None = None,
) -> Iterator[AskStarted | ChatEvent | AskFinished]:
    if not question.strip():
        raise EmptyMessage("There is nothing to ask.", "Type a question first.")
    with runtime.lease() as engine:
        prompt = documents_turn(documents, engine, DocumentsQuestion(question, "", collection, top_k), params)
        yield AskStarted(prompt.found, prompt.prompt_tokens)
        answer = yield from streamed_answer(engine, prompt, params, cancel or CancelToken())
        yield AskFinished(answer)
