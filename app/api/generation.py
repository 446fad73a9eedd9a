"""The engine side of one answer, run on the answer's own thread (``answers.AnswerJob``): hold the model, check
the model id against what is loaded, fit the prompt, then stream. The request was validated before; everything
here either needs the model or may wait for it."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace

from app.api.answers import Called, CallOpened, CallPiece, Checked, Started, Step, Work
from app.api.attachments import SentFile, read_sent_files
from app.api.directory import ModelDirectory
from app.api.ids import collection_id
from app.api.prompting import fit_answer, split_question
from app.api.responses import Extension
from app.services.answering.documents_prompt import paired_turns
from app.services.answering.documents_turn import (
    DocumentsQuestion,
    documents_turn,
    loose_turn,
    refound_turns,
    streamed_answer,
)
from app.services.container import Services
from backends.base import (
    CancelToken,
    ChatEvent,
    ChatMessage,
    Finished,
    GenerationParams,
    LinkedCancel,
    TextDelta,
    ToolCall,
)
from backends.tool_calls import CallArguments, CallBegun, calls_in, tools_instructions
from models.shared.errors import EmptyMessage


@dataclass(frozen=True)
class ChatJob:
    model: str  # as requested
    messages: Sequence[ChatMessage]
    params: GenerationParams
    collection: str | None = None
    top_k: int = 5
    files: tuple[SentFile, ...] = field(default=(), repr=False)  # sent with the request, read for it only
    stream: bool = True  # the reply is streamed: a call's pieces are sent as they are written


def chat_work(services: Services, directory: ModelDirectory, job: ChatJob) -> Work:
    def work(cancel: CancelToken) -> Generator[Step, None, None]:
        collection = directory.collection(job.collection, job.model) if job.collection is not None else None
        with services.runtime.lease() as engine:
            if collection is None and not job.files:
                model_id, adapter = directory.chat_model(job.model)
                wanted = replace(job.params, adapter=adapter) if adapter is not None else job.params
                offered = engine.count_tokens(tools_instructions(wanted.tools)) if wanted.tools else 0
                prompt_tokens = engine.count_chat_tokens(job.messages) + offered
                params = fit_answer(wanted, prompt_tokens, engine.context_length)
                yield Started(model_id, Extension())
                if not params.tools:
                    yield from engine.stream_chat(job.messages, params, cancel)
                    return
                calling = LinkedCancel(cancel)  # stopped when the model starts repeating a call
                written = engine.stream_chat(job.messages, params, calling)
                yield from with_calls(written, calling.cancel, pieces=job.stream)
                return
            model_id, adapter = job.model, None
            if not job.model.casefold().startswith("hearth:"):
                # A chat model id (perhaps MODEL+ADAPTER) with the hearth.collection field, or with files.
                model_id, adapter = directory.chat_model(job.model)
            job_params = replace(job.params, adapter=adapter) if adapter is not None else job.params
            system, before, after, question = split_question(job.messages)
            if not question.strip():
                raise EmptyMessage("The last user message is empty.", "Put the question in the last user message.")
            documents = directory.documents()
            attached = read_sent_files(job.files, services.paths.api_files_dir, documents, cancel) or []
            if cancel.cancelled:
                return
            asked = DocumentsQuestion(question, system, collection, job.top_k, attached)
            pairs = paired_turns(before)
            if pairs is None:  # not question, answer, question, …: the client's turns as they are
                turn = loose_turn(documents, engine, asked, job_params, before, after)
            else:
                earlier = refound_turns(documents, engine, asked, job_params, pairs)
                turn = documents_turn(documents, engine, asked, job_params, earlier, after=after)
            params = fit_answer(job_params, turn.prompt_tokens, engine.context_length)
            found = turn.found
            extension = Extension(collection, found.sources, turn.dropped_messages, attachments=found.uses)
            yield Started(collection_id(collection) if collection else model_id, extension)
            answer = yield from streamed_answer(engine, turn, params, cancel)
            if not cancel.cancelled:
                yield Checked(answer)

    return work


def completion_work(
    services: Services, directory: ModelDirectory, model: str, prompt: str, params: GenerationParams
) -> Work:
    def work(cancel: CancelToken) -> Generator[Step, None, None]:
        with services.runtime.lease() as engine:
            model_id, adapter = directory.chat_model(model)
            params_asked = replace(params, adapter=adapter) if adapter is not None else params
            # The model adds its BOS token in front of a raw prompt; one token is the most it costs.
            fitted = fit_answer(params_asked, engine.count_tokens(prompt) + 1, engine.context_length)
            yield Started(model_id, Extension())
            yield from engine.stream_completion(prompt, fitted, cancel)

    return work


def with_calls(
    events: Iterator[ChatEvent], stop: Callable[[], None], pieces: bool = True
) -> Generator[Step, None, None]:
    """The engine's events with the tool calls in the answer's text taken out of it and sent as calls, each
    opened as soon as its name is written and its arguments sent as they come (with ``pieces``: for a streamed
    reply; a whole reply needs only each call once it is complete). A call the answer already made,
    same function and arguments (small models repeat a call until their answer runs out), is not sent again: the
    answer is stopped there and ends as if the model had stopped. So that a repeat is never half sent, a call's
    pieces are held while its arguments so far begin those of a call already sent to the same function."""
    sent: list[_Sent] = []
    writing: _Writing | None = None
    stopped = False
    for item in calls_in(events, pieces=True) if pieces else calls_in(events):
        if isinstance(item, CallBegun | CallArguments | ToolCall | TextDelta) and stopped:
            continue
        if isinstance(item, CallBegun):
            writing = _Writing(item.id, item.name)
        elif isinstance(item, CallArguments) and writing is not None:
            writing.arguments += item.text
            if writing.opened:
                yield CallPiece(len(sent), item.text)
            elif not any(s.call.name == writing.name and s.written.startswith(writing.arguments) for s in sent):
                writing.opened = True
                yield CallOpened(len(sent), writing.id, writing.name, writing.arguments)
        elif isinstance(item, ToolCall):
            opened = writing is not None and writing.opened
            repeated = any((s.call.name, s.call.arguments) == (item.name, item.arguments) for s in sent)
            if not repeated or opened:
                yield Called(item, len(sent), streamed=opened)
                sent.append(_Sent(item, writing.arguments if writing is not None else item.arguments))
            writing = None
            if repeated:
                stopped = True
                stop()
        elif isinstance(item, TextDelta):
            yield item
        elif not isinstance(item, CallArguments):
            yield Finished("stop") if stopped and isinstance(item, Finished) else item


@dataclass(frozen=True)
class _Sent:
    """A call sent: as read (its arguments normalized) and its arguments as the model wrote them."""

    call: ToolCall
    written: str


@dataclass
class _Writing:
    """The call the model is writing: what it has written of the arguments, and whether it was sent yet."""

    id: str
    name: str
    arguments: str = ""
    opened: bool = False
