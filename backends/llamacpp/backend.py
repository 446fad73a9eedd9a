"""llama.cpp through llama-cpp-python's C bindings: the CPU, NVIDIA GPUs, or layers split across several.

The prompt is rendered by Hearth's sandboxed template (not llama-cpp-python's chat handlers) and tokenized by
the model's own tokenizer. Answers are written by ``backends.llamacpp.batch``: ``slots`` of them at once in one
context, each slot keeping its conversation's prefix cached between turns. Each caller iterates its own
generator; cancellation, token counts and timings are exact per answer.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
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
    GenerationParams,
    LoadOptions,
    LoadProgress,
    Support,
    TextDelta,
    ToolSpec,
)
from backends.chat_template import ChatFormatter
from backends.grammar import check_grammar
from backends.llamacpp import placement
from backends.llamacpp.log_route import route_llama_logs
from backends.llamacpp.vocab_markers import special_texts
from backends.memory import KV_WIDTHS, MemoryEstimate, estimate_llamacpp
from backends.plan import PlanContext, PlanOption
from backends.plan_reasons import LLAMACPP_CPU, NVIDIA
from backends.thinking import opens_thinking, without_thinking
from backends.turn_markers import Defuser, marker_texts
from models.shared.errors import ContextTooLong, EmptyMessage, HearthError, ModelLoadError, ModelNotReady

if TYPE_CHECKING:
    from backends.hardware import HardwareInventory
    from backends.llamacpp.batch import BatchScheduler
    from backends.llamacpp.caches.passage_store import PassageStore
    from backends.llamacpp.caches.prompt_spans import Span
    from backends.llamacpp.caches.saved_slots import SavedSlots
    from backends.llamacpp.native import NativeModel
    from models.gguf import ModelInfo


class LlamaCppBackend(Backend):
    name: ClassVar[str] = "llamacpp"
    label: ClassVar[str] = "llama.cpp (CPU)"
    capabilities: ClassVar[Capabilities] = Capabilities(
        streaming=True,
        lora_hot_swap=True,
        multi_device=True,
        embeddings=False,
        parallel=True,
        grammar=True,
        cache_types=True,
        listed_architectures=True,
    )
    routes: ClassVar[tuple[str, ...]] = (NVIDIA, LLAMACPP_CPU)
    choices: ClassVar[tuple[BackendChoice, ...]] = (
        BackendChoice("llamacpp", "llama.cpp"),
        BackendChoice("cuda", "llama.cpp on NVIDIA GPUs (CUDA)"),
        BackendChoice("pipeline", "Split across the paired workers (llama.cpp RPC)", uses_workers=True),
    )

    def __init__(self) -> None:
        self._engine: NativeModel | None = None
        self._scheduler: BatchScheduler | None = None
        self._formatter: ChatFormatter | None = None
        self._loaded_threads = 1  # what the model was loaded with: set_threads(None) returns to it
        self._stack = ExitStack()

    # --- class-level -------------------------------------------------------------------------------------
    @classmethod
    def availability(cls, inventory: HardwareInventory) -> Availability:
        if inventory.llama_cpp is None:
            return Availability(
                False, "llama-cpp-python is not installed or failed to load", "Run `make run` to build it."
            )
        return Availability(True, f"llama-cpp-python {inventory.llama_cpp.version} is installed")

    @classmethod
    def supports(cls, model: ModelInfo) -> Support:
        # llama.cpp reads every architecture a GGUF converter can write; it refuses unknown ones at load.
        return Support(True, f"llama.cpp runs {model.architecture} models in {model.quantization}")

    @classmethod
    def estimate_memory(cls, model: ModelInfo, options: LoadOptions) -> MemoryEstimate:
        return estimate_llamacpp(model, options.context_length, options.slots, KV_WIDTHS[options.kv_cache_type])

    @classmethod
    def propose(cls, ctx: PlanContext) -> list[PlanOption]:
        return placement.propose(ctx, cls)

    @classmethod
    def unavailable(cls, inventory: HardwareInventory, choice: str) -> str | None:
        build = inventory.llama_cpp
        if build is None:
            return "llama-cpp-python is not installed"
        if choice != "cuda":
            return None
        if inventory.gpu_problem:
            return inventory.gpu_problem
        if not inventory.gpus:
            return "no NVIDIA GPU found"
        return None if "cuda" in build.ggml_backends else "this llama.cpp build has no CUDA support"

    # --- instance ----------------------------------------------------------------------------------------
    @property
    def context_length(self) -> int:
        """Tokens each slot holds (llama.cpp rounds the asked-for length up to a multiple of 256)."""
        return self._engine.shape.context_length if self._engine else 0

    @property
    def slots(self) -> int:
        return self._engine.shape.slots if self._engine else 1

    @property
    def notes(self) -> tuple[str, ...]:
        reason = self._formatter.fallback_reason if self._formatter else None
        return (f"Using the ChatML prompt format because {reason}.",) if reason else ()

    def load(self, model: ModelInfo, options: LoadOptions) -> Iterator[LoadProgress]:
        self.close()
        yield LoadProgress(0.05, f"Opening {model.path.name}")
        try:
            from backends.llamacpp.batch import BatchScheduler
            from backends.llamacpp.native import BATCH_TOKENS, NativeModel, TokenBatch
        except (ImportError, OSError) as exc:
            raise ModelLoadError(
                f"llama-cpp-python cannot be loaded: {exc}.", "Run `make run` to (re)build it."
            ) from exc
        route_llama_logs()
        # The template's renderer process starts now, so it is up by the time the model is and the probe runs.
        formatter = ChatFormatter(model.chat_template, model.bos_token, model.eos_token)
        self._stack.callback(formatter.close)
        try:
            engine = NativeModel(model.path, options)
        except (ValueError, RuntimeError, OSError) as exc:
            self.close()
            raise ModelLoadError(
                f"llama.cpp could not load {model.path.name}: {exc}.",
                "The file may use an architecture this llama.cpp build does not know; try another model.",
            ) from exc
        # Closed in reverse: the scheduler thread stops before the batch and the context it uses are freed.
        self._stack.callback(engine.close)
        batch = TokenBatch(BATCH_TOKENS)
        self._stack.callback(batch.close)
        # Answers that name no seed draw a fresh one from here: a fixed load seed makes a run repeatable.
        saved = _saved_slots(model, options)
        scheduler = BatchScheduler(engine, batch, random.Random(options.seed or None), saved, _passages(model, options))
        self._stack.callback(scheduler.close)
        yield LoadProgress(0.9, "Checking the model's chat template")
        formatter.defuser = Defuser(marker_texts(special_texts(engine.vocab)))
        formatter.probe()
        self._engine = engine
        self._scheduler = scheduler
        self._formatter = formatter
        self._loaded_threads = options.threads
        yield LoadProgress(1.0, "Model ready")

    def set_threads(self, threads: int | None) -> None:
        scheduler = self._scheduler
        if scheduler is not None:
            scheduler.set_threads(threads or self._loaded_threads)

    def forget_owner(self, owner: str) -> None:
        scheduler = self._scheduler
        if scheduler is not None and owner:
            scheduler.forget_owner(owner)

    def _require(self) -> tuple[NativeModel, ChatFormatter]:
        if self._engine is None or self._formatter is None:
            raise ModelNotReady("No model is loaded.", "Wait for the model to finish loading, or pick a model.")
        return self._engine, self._formatter

    def _tokenize_chat(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()) -> list[int]:
        _, formatter = self._require()
        return self._tokens_of(formatter.render_chat(messages, tools))

    def _tokens_of(self, prompt: str) -> list[int]:
        """A rendered chat prompt as tokens: its special tokens read as such, BOS added unless it prints it."""
        engine, _ = self._require()
        return engine.tokenize(prompt, add_special=self._wants_bos(prompt), parse_special=True)

    def _wants_bos(self, prompt: str) -> bool:
        """Templates (and raw prompts) that print the BOS text themselves must not get a second one."""
        _, formatter = self._require()
        return not (formatter.bos_token and prompt.startswith(formatter.bos_token))

    def count_tokens(self, text: str) -> int:
        engine, _ = self._require()
        return len(engine.tokenize(text, add_special=False, parse_special=False))

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return len(self._tokenize_chat(messages))

    def stream_chat(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]:
        started = time.perf_counter()
        engine, formatter = self._require()
        prompt = formatter.render_chat(messages, params.tools)
        if not (params.passages and engine.can_join):
            answer = self._answer(self._tokens_of(prompt), params, cancel, started)
            yield from without_thinking(answer, opens_thinking(prompt))
            return
        # The prompt is read in pieces cut at its passages, so each passage is the same tokens wherever it stands
        # and its kept cache can be found (``backends.llamacpp.caches.prompt_spans``).
        from backends.llamacpp.caches.prompt_spans import segments, tokenized

        bos = self._wants_bos(prompt)
        tokens, spans = tokenized(
            segments(prompt, params.passages), lambda text, first: engine.tokenize(text, first and bos, True)
        )
        yield from without_thinking(self._answer(tokens, params, cancel, started, spans), opens_thinking(prompt))

    def stream_completion(self, prompt: str, params: GenerationParams, cancel: CancelToken) -> Iterator[ChatEvent]:
        started = time.perf_counter()
        engine, _ = self._require()
        # Special-token text is read as special tokens, as llama.cpp's own server reads completion prompts.
        tokens = engine.tokenize(prompt, add_special=self._wants_bos(prompt), parse_special=True)
        if not tokens:
            raise EmptyMessage("The prompt is empty.", "Send some text for the model to continue.")
        yield from self._answer(tokens, params, cancel, started)

    def _answer(
        self,
        prompt: list[int],
        params: GenerationParams,
        cancel: CancelToken,
        started: float,
        spans: Sequence[Span] = (),
    ) -> Iterator[ChatEvent]:
        engine, scheduler = self._engine, self._scheduler
        if engine is None or scheduler is None:
            raise ModelNotReady("No model is loaded.", "Wait for the model to finish loading, or pick a model.")
        context = engine.shape.context_length
        if len(prompt) >= context:
            raise ContextTooLong(
                f"The prompt is {len(prompt)} tokens; the context window holds {context}.",
                "Shorten the message or start a new conversation.",
            )
        if params.grammar is not None:
            check_grammar(engine.vocab, params.grammar)  # refused here, before it could fail inside a batch
        request = scheduler.submit(prompt, params, cancel, started, spans)
        try:
            while True:
                event = scheduler.next_event(request)
                if isinstance(event, HearthError):
                    raise event
                if isinstance(event, TextDelta) and cancel.cancelled:
                    continue  # Stop means no more text, even text written before the scheduler saw it
                yield event
                if isinstance(event, Finished):
                    return
        finally:
            request.abandon()  # a no-op once finished; otherwise the slot is freed at the next step

    def close(self) -> None:
        # Forget the handles first, so a call racing with close() finds no model rather than a freed one.
        self._engine = None
        self._scheduler = None
        self._formatter = None
        self._stack.close()
        self._stack = ExitStack()


def _cache_key(model: ModelInfo, options: LoadOptions) -> str | None:
    """What a saved cache is good only for: the model file (its path, size and modification time), the context cache
    type and the llama.cpp build; None when the file cannot be read."""
    import llama_cpp

    try:
        stat = model.path.stat()
    except OSError:
        return None
    parts = (model.path.resolve(), stat.st_size, stat.st_mtime_ns, options.kv_cache_type, llama_cpp.__version__)
    return "|".join(str(part) for part in parts)


def _saved_slots(model: ModelInfo, options: LoadOptions) -> SavedSlots | None:
    """Where this model's conversation caches are kept, when saving them is on."""
    caches = options.saved_caches
    key = _cache_key(model, options) if caches is not None and caches.cap_bytes > 0 else None
    if caches is None or key is None:
        return None
    from backends.llamacpp.caches.saved_slots import SavedSlots

    return SavedSlots(Path(caches.folder), key, caches.cap_bytes, model.path)


def _passages(model: ModelInfo, options: LoadOptions) -> PassageStore:
    """The kept passage caches: in memory, packed unless the caches say f16, and on disk when that is on."""
    from backends.llamacpp.caches.passage_store import PassageStore

    caches = options.saved_caches
    packed = caches is None or caches.passages_type == "q8_0"
    key = _cache_key(model, options) if caches is not None and caches.passages_cap_bytes > 0 else None
    if caches is None or key is None or not caches.passages_folder:
        return PassageStore(packed=packed)
    from backends.llamacpp.caches.passage_shelf import PassageShelf

    shelf = PassageShelf(Path(caches.passages_folder), key, caches.passages_cap_bytes, model.path)
    return PassageStore(shelf=shelf, packed=packed)
