"""llama.cpp on the CPU through llama-cpp-python.

The prompt is rendered by Hearth's sandboxed template (not llama-cpp-python's chat handlers), tokenized by
the model's own tokenizer, and generated token by token so cancellation, token counts and timings are exact.
"""

from __future__ import annotations

import codecs
import ctypes
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, ClassVar

from app.errors import ContextTooLong, GenerationError, ModelLoadError, ModelNotReady
from backends.base import (
    Availability,
    Backend,
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
from backends.chat_template import ChatFormatter, build_formatter
from backends.memory import MemoryEstimate, estimate_llamacpp

if TYPE_CHECKING:
    from backends.hardware import HardwareInventory
    from models.gguf import ModelInfo

log = logging.getLogger("llama.cpp")
# ggml log levels: 1 debug, 2 info, 3 warn, 4 error, 5 continuation of the previous line.
_GGML_LEVELS = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_log_callback: Any = None


def route_llama_logs() -> None:
    """Send llama.cpp's C-level log lines and llama-cpp-python's own prints to Python logging (once per
    process). Its prints are redirected through its module's ``print`` name only, so no other thread's output
    is touched."""
    global _log_callback
    if _log_callback is not None:
        return
    import llama_cpp
    import llama_cpp.llama

    def print_to_log(*values: object, **_ignored: object) -> None:
        log.debug("%s", " ".join(str(value) for value in values))

    llama_cpp.llama.print = print_to_log  # type: ignore[attr-defined]

    previous = [logging.DEBUG]

    def forward(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
        python_level = _GGML_LEVELS.get(level, previous[0])
        previous[0] = python_level
        message = text.decode("utf-8", errors="replace").rstrip()
        if message:
            log.log(python_level, "%s", message)

    _log_callback = llama_cpp.llama_log_callback(forward)  # the reference keeps ctypes from freeing it
    llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))


class LlamaCppBackend(Backend):
    name: ClassVar[str] = "llamacpp"
    label: ClassVar[str] = "llama.cpp (CPU)"
    capabilities: ClassVar[Capabilities] = Capabilities(
        streaming=True, lora_hot_swap=True, multi_device=False, embeddings=False
    )

    def __init__(self) -> None:
        self._llm: Any = None
        self._formatter: ChatFormatter | None = None
        self._model: ModelInfo | None = None
        self._context_length = 0
        self._lock = threading.Lock()
        self._stack = ExitStack()
        self._active_cancel: CancelToken | None = None
        self._abort_callback: Any = None

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
        return estimate_llamacpp(model, options.context_length)

    # --- instance ----------------------------------------------------------------------------------------
    @property
    def context_length(self) -> int:
        return self._context_length

    @property
    def notes(self) -> tuple[str, ...]:
        reason = self._formatter.fallback_reason if self._formatter else None
        return (f"Using the ChatML prompt format because {reason}.",) if reason else ()

    def load(self, model: ModelInfo, options: LoadOptions) -> Iterator[LoadProgress]:
        self.close()
        yield LoadProgress(0.05, f"Opening {model.path.name}")
        try:
            from llama_cpp import Llama
        except (ImportError, OSError) as exc:
            raise ModelLoadError(
                f"llama-cpp-python cannot be loaded: {exc}.", "Run `make run` to (re)build it."
            ) from exc
        route_llama_logs()
        try:
            # verbose=False would make llama-cpp-python point the process's stdout/stderr file descriptors at
            # /dev/null while it loads, swallowing whatever other threads print meanwhile (such as the URL of
            # the web UI or an error message). Stay verbose while loading; route_llama_logs() sends all of it
            # to `logging`.
            llm = Llama(
                model_path=str(model.path),
                n_ctx=options.context_length,
                n_threads=options.threads,
                n_threads_batch=options.threads,
                n_gpu_layers=options.gpu_layers,
                main_gpu=options.main_gpu,
                tensor_split=list(options.tensor_split) or None,
                flash_attn=options.gpu_layers > 0,  # on GPUs it saves memory and time; CPU keeps the default
                seed=options.seed,
                use_mmap=True,
                verbose=True,
            )
            llm.verbose = False
            self._install_abort_callback(llm)
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelLoadError(
                f"llama.cpp could not load {model.path.name}: {exc}.",
                "The file may use an architecture this llama.cpp build does not know; try another model.",
            ) from exc
        self._stack.callback(llm.close)
        self._llm = llm
        self._model = model
        self._context_length = int(llm.n_ctx())
        self._formatter = build_formatter(model.chat_template, model.bos_token, model.eos_token)
        yield LoadProgress(1.0, "Model ready")

    def _install_abort_callback(self, llm: Any) -> None:
        """Let Stop interrupt a long prompt evaluation, not only the token loop. llama.cpp polls this between
        graph nodes (about 1% of decode speed here, measured)."""
        import llama_cpp

        def should_abort(_data: ctypes.c_void_p) -> bool:
            cancel = self._active_cancel
            return cancel is not None and cancel.cancelled

        self._abort_callback = llama_cpp.ggml_abort_callback(should_abort)
        llama_cpp.llama_set_abort_callback(llm._ctx.ctx, self._abort_callback, ctypes.c_void_p(0))

    def _require(self) -> tuple[Any, ChatFormatter]:
        if self._llm is None or self._formatter is None:
            raise ModelNotReady("No model is loaded.", "Wait for the model to finish loading, or pick a model.")
        return self._llm, self._formatter

    def _tokenize_prompt(self, messages: Sequence[ChatMessage]) -> list[int]:
        llm, formatter = self._require()
        prompt = formatter.render(messages)
        # Templates that print the BOS text themselves must not get a second one from the tokenizer.
        add_bos = not (formatter.bos_token and prompt.startswith(formatter.bos_token))
        return list(llm.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True))

    def count_tokens(self, text: str) -> int:
        llm, _ = self._require()
        return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return len(self._tokenize_prompt(messages))

    def stream_chat(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]:
        with self._lock:
            self._active_cancel = cancel
            try:
                yield from self._generate(messages, params, cancel)
            finally:
                self._active_cancel = None

    def _generate(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]:
        import llama_cpp

        llm, _ = self._require()
        started = time.perf_counter()
        prompt = self._tokenize_prompt(messages)
        room = self._context_length - len(prompt)
        if room < 1:
            raise ContextTooLong(
                f"The prompt is {len(prompt)} tokens; the context window holds {self._context_length}.",
                "Shorten the message or start a new conversation.",
            )
        budget = min(params.max_new_tokens, room)
        if params.seed is not None:
            llm.set_seed(params.seed)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        vocab = llm._model.vocab
        produced = 0
        first_token_at: float | None = None
        reason: FinishReason = "length"
        tokens = llm.generate(
            prompt,
            temp=params.temperature,
            top_p=params.top_p,
            top_k=40,
            min_p=0.05,
            repeat_penalty=params.repeat_penalty,
        )
        try:
            for token in tokens:
                if first_token_at is None:
                    first_token_at = time.perf_counter()
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    reason = "stop"
                    break
                produced += 1
                text = decoder.decode(llm.detokenize([token], special=False))
                if text:
                    yield TextDelta(text)
                if cancel.cancelled:
                    reason = "cancelled"
                    break
                if produced >= budget:
                    break
        except RuntimeError as exc:  # llama_decode failed or was aborted; its KV cache no longer matches
            llm.reset()
            if not cancel.cancelled:
                raise GenerationError(
                    f"llama.cpp stopped in the middle of the answer ({exc}).",
                    "Send the message again; if it keeps failing, start a new conversation or restart Hearth.",
                ) from exc
            reason = "cancelled"
        tail = decoder.decode(b"", final=True)
        if tail:
            yield TextDelta(tail)
        finished = time.perf_counter()
        ttft = (first_token_at or finished) - started
        yield Usage(
            prompt_tokens=len(prompt),
            completion_tokens=produced,
            time_to_first_token_ms=ttft * 1000,
            total_ms=(finished - started) * 1000,
        )
        yield Finished(reason)

    def close(self) -> None:
        self._stack.close()
        self._stack = ExitStack()
        self._abort_callback = None
        self._llm = None
        self._formatter = None
        self._model = None
        self._context_length = 0
