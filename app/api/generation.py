"""The engine side of one answer, run on the answer's own thread (``answers.AnswerJob``): hold the model, check
the model id against what is loaded, fit the prompt, then stream. The request was validated before; everything
here either needs the model or may wait for it."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field, replace

from app.api.answers import Started, Step, Work
from app.api.attachments import SentFile, read_sent_files
from app.api.directory import ModelDirectory
from app.api.ids import collection_id
from app.api.prompting import fit_answer, split_question
from app.api.responses import Extension
from app.errors import EmptyMessage
from app.services.ask import FoundSources, find_sources
from app.services.container import Services
from app.services.documents_prompt import DocumentsTurn, assemble, paired_turns, replayed_cut
from app.services.history import fit_history, prompt_budget
from backends.base import CancelToken, ChatMessage, GenerationParams
from rag.prompt import Source, continue_numbering, rag_question, rag_system_prompt


@dataclass(frozen=True)
class ChatJob:
    model: str  # as requested
    messages: Sequence[ChatMessage]
    params: GenerationParams
    collection: str | None = None
    top_k: int = 5
    files: tuple[SentFile, ...] = field(default=(), repr=False)  # sent with the request, read for it only


def chat_work(services: Services, directory: ModelDirectory, job: ChatJob) -> Work:
    def work(cancel: CancelToken) -> Generator[Step, None, None]:
        collection = directory.collection(job.collection, job.model) if job.collection is not None else None
        with services.runtime.lease() as engine:
            if collection is None and not job.files:
                model_id, adapter = directory.chat_model(job.model)
                wanted = replace(job.params, adapter=adapter) if adapter is not None else job.params
                params = fit_answer(wanted, engine.count_chat_tokens(job.messages), engine.context_length)
                yield Started(model_id, Extension())
                yield from engine.stream_chat(job.messages, params, cancel)
                return
            model_id, adapter = job.model, None
            if not job.model.casefold().startswith("hearth:"):
                # A chat model id (perhaps MODEL+ADAPTER) with the hearth.collection field, or with files.
                model_id, adapter = directory.chat_model(job.model)
            job_params = replace(job.params, adapter=adapter) if adapter is not None else job.params
            system, before, after, question = split_question(job.messages)
            if not question.strip():
                raise EmptyMessage("The last user message is empty.", "Put the question in the last user message.")
            system_prompt = rag_system_prompt(system)
            documents = directory.documents()
            attached = read_sent_files(job.files, services.paths.api_files_dir, documents, cancel) or []
            if cancel.cancelled:
                return
            budget = prompt_budget(engine.context_length, job_params.max_new_tokens)

            def passages_for(asked: str) -> FoundSources:
                return find_sources(
                    documents, engine, collection, asked, system_prompt, job_params, job.top_k, attached
                )

            earlier = paired_turns(before)
            if earlier is None:  # not question, answer, question, …: the client's turns as they are
                found = passages_for(question)
                asked = ChatMessage("user", rag_question(question, found.sources))
                history = [ChatMessage("system", system_prompt), *before, asked, *after]
                fitted = fit_history(history, budget, engine.count_chat_tokens)
                messages, prompt_tokens, dropped = fitted.messages, fitted.prompt_tokens, fitted.dropped
            else:
                # The client sends its history without the passages Hearth gave each turn: they are found again
                # (same index, same question, same passages), so the prompt is the one the last request had, plus
                # this turn, and the engine's cache of it is used.
                turns: list[DocumentsTurn] = []
                shown: list[Source] = []
                for asked_before, answered in earlier:
                    numbered = continue_numbering(passages_for(asked_before).sources, shown)
                    shown.extend(numbered)
                    turns.append(DocumentsTurn(asked_before, numbered, answered))
                found = passages_for(question)
                found = replace(found, sources=continue_numbering(found.sources, shown))
                turns.append(DocumentsTurn(question, found.sources))
                count = engine.count_chat_tokens
                built = assemble(system_prompt, turns, budget, count, replayed_cut(system_prompt, turns, budget, count))
                messages = (*built.messages, *after)
                prompt_tokens = built.prompt_tokens if not after else count(messages)
                dropped = built.dropped_messages
            params = fit_answer(job_params, prompt_tokens, engine.context_length)
            extension = Extension(
                collection=collection, sources=found.sources, dropped_messages=dropped, attachments=found.uses
            )
            yield Started(collection_id(collection) if collection else model_id, extension)
            yield from engine.stream_chat(messages, params, cancel)

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
