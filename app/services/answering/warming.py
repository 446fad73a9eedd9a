"""Reading a collection's passages ahead, in the background after indexing. Each passage of the files just indexed
is read once by the model, alone after Hearth's documents instructions, as a question's first passage is, so that its
llama.cpp cache is kept (``backends.llamacpp.caches.passage_store``) and the first question that retrieves it joins it
instead of reading it.

Only where passages are kept (``rag.keep_passages``), and only as many as the kept caches'
room holds: more would push out those read first (:func:`warming_plan`). Each passage costs what
reading it in a question would, so the page reads ahead only when asked (``rag.read_ahead``) and never on battery
(:func:`on_battery`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from app.services.library.documents import DocumentServices
from app.services.serving.runtime import ModelRuntime
from app.settings import Settings
from backends.base import CancelToken, ChatMessage, GenerationParams, Usage
from backends.llamacpp.caches.passage_store import DEFAULT_CAP_BYTES
from backends.memory import KV_WIDTHS, kv_cache_bytes
from models.gguf import ModelInfo
from rag.prompt import Source, rag_question, rag_system_prompt, shown_text

# What the passage is read before: any question would do (a passage's cache holds only what comes before it).
WARM_QUESTION = "What does this passage say?"
ROOM_SHARE = 0.9  # of the kept caches' room, left to the passages read ahead: the rest to those questions read


@dataclass(frozen=True)
class WarmProgress:
    """Passages read ahead so far of ``total`` (``kept_before`` of them found kept already, so joined instead of
    read), and the time it took."""

    done: int
    total: int
    kept_before: int
    elapsed_s: float

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the pace so far; None before the first passage."""
        if self.done == 0:
            return None
        return self.elapsed_s / self.done * (self.total - self.done)


def on_battery(probe: Callable[[], Any] | None = None) -> bool:
    """Whether this computer runs on its battery now (False without one, or where that cannot be told)."""
    if probe is None:
        import psutil

        probe = psutil.sensors_battery
    try:
        battery = probe()
    except (OSError, RuntimeError, AttributeError):
        return False
    return battery is not None and battery.power_plugged is False


def room_tokens(model: ModelInfo, settings: Settings) -> int:
    """How many passage tokens the kept caches hold: on disk when they are kept there, else in memory."""
    cap = settings.backend.passage_cache_mb << 20 or DEFAULT_CAP_BYTES
    per_token = kv_cache_bytes(model, 1, KV_WIDTHS[settings.backend.passage_cache_type])
    return int(cap * ROOM_SHARE) // max(1, per_token)


def warming_plan(passages: Sequence[Source], tokens: Sequence[int], room: int) -> list[Source]:
    """The passages to read ahead, in order, while their tokens fit in ``room`` (pure)."""
    chosen: list[Source] = []
    used = 0
    for passage, count in zip(passages, tokens, strict=True):
        if used + count > room:
            break
        chosen.append(passage)
        used += count
    return chosen


def passages_of(documents: DocumentServices, collection: str, paths: Sequence[str]) -> list[Source]:
    """The passages of the files at ``paths`` in ``collection``, file by file in that order, each in reading order."""
    info = documents.manifest.get(collection)
    chunks = [c for path in paths for c in documents.store.chunks_of(info.store_name, info.embedder, path)]
    return [Source(1, c.path, c.page, c.section, c.text) for c in chunks]


def planned(runtime: ModelRuntime, passages: Sequence[Source], room: int) -> list[Source]:
    """The passages that fit in ``room`` tokens, counted with the loaded model's tokenizer."""
    with runtime.lease() as engine:
        return warming_plan(passages, [engine.count_tokens(shown_text(p)) for p in passages], room)


def warm(
    runtime: ModelRuntime,
    plan: Sequence[Source],
    params: GenerationParams,
    cancel: CancelToken,
    system_prompt: str = "",
) -> Iterator[WarmProgress]:
    """Read each passage of ``plan`` once, keeping its cache; a progress event before the first and after each.
    Stops when ``cancel`` is set; what was read stays kept."""
    system = ChatMessage("system", rag_system_prompt(system_prompt))
    reading = dataclasses.replace(params, max_new_tokens=1, temperature=0.0, prompt_lookup=False)
    started, kept_before = time.perf_counter(), 0
    yield WarmProgress(0, len(plan), 0, 0.0)
    for done, passage in enumerate(plan, start=1):
        messages = [system, ChatMessage("user", rag_question(WARM_QUESTION, [passage]))]
        asked = dataclasses.replace(reading, passages=(shown_text(passage),))
        with runtime.lease() as engine:
            for event in engine.stream_chat(messages, asked, cancel):
                if isinstance(event, Usage) and event.joined_tokens > 0:
                    kept_before += 1
        if cancel.cancelled:
            return
        yield WarmProgress(done, len(plan), kept_before, time.perf_counter() - started)
