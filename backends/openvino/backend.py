"""OpenVINO GenAI on the same GGUF file: Intel NPU, Intel GPU (integrated or discrete) or the CPU.

``openvino_genai.LLMPipeline`` reads the GGUF directly (llama, qwen2 and qwen3 architectures; Q4_0, Q4_1, Q8_0,
Q4_K and float weights) and compiles it for the device; the compiled model is cached in the data directory so
the second load is fast. Prompts are rendered by Hearth's sandboxed chat template, exactly as for llama.cpp.

The NPU compiles for static shapes: a longest prompt and a shortest answer are fixed when the model loads. A
prompt over that limit is refused with a message before generation (the NPU would otherwise fail or truncate).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

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
from backends.chat_template import ChatFormatter
from backends.memory import MemoryEstimate, estimate_openvino
from backends.openvino import placement
from backends.openvino.placement import NPU_MAX_PROMPT_TOKENS, NPU_MIN_RESPONSE_TOKENS
from backends.plan import PlanContext, PlanOption
from backends.plan_reasons import INTEL_GPU, NPU, OPENVINO_CPU
from backends.stops import StopScanner
from backends.thinking import opens_thinking, without_thinking
from backends.turn_markers import Defuser, marker_texts
from models.gguf import special_token_texts
from models.shared.errors import ContextTooLong, GenerationError, ModelLoadError, ModelNotReady

if TYPE_CHECKING:
    from backends.hardware import HardwareInventory
    from models.gguf import ModelInfo

log = logging.getLogger(__name__)

# What OpenVINO GenAI's GGUF reader understands (2026.4). Anything else fails at load ("gguf_tensor_to_f16
# failed" for a Qwen2.5 Q4_K_M file with Q5_0 and Q6_K tensors, seen here), so it is refused up front.
SUPPORTED_ARCHITECTURES = frozenset({"llama", "qwen2", "qwen3"})
SUPPORTED_TENSOR_TYPES = frozenset({"F32", "F16", "Q4_0", "Q4_1", "Q8_0", "Q4_K"})


class OpenVinoBackend(Backend):
    name: ClassVar[str] = "openvino"
    label: ClassVar[str] = "OpenVINO"
    capabilities: ClassVar[Capabilities] = Capabilities(
        streaming=True, lora_hot_swap=False, multi_device=False, embeddings=False
    )
    routes: ClassVar[tuple[str, ...]] = (INTEL_GPU, NPU, OPENVINO_CPU)
    choices: ClassVar[tuple[BackendChoice, ...]] = (BackendChoice("openvino", "OpenVINO (Intel NPU, GPU or CPU)"),)

    def __init__(self) -> None:
        self._pipe: Any = None
        self._tokenizer: Any = None
        self._formatter: ChatFormatter | None = None
        self._device = ""
        self._context_length = 0
        self._max_prompt_tokens: int | None = None
        self._lock = threading.Lock()

    # --- class-level -------------------------------------------------------------------------------------
    @classmethod
    def availability(cls, inventory: HardwareInventory) -> Availability:
        if inventory.openvino is None:
            return Availability(
                False, "OpenVINO GenAI is not installed or failed to load", "Run `make setup` to install it."
            )
        devices = ", ".join(d.id for d in inventory.openvino) or "none"
        return Availability(True, f"OpenVINO {inventory.openvino_version} sees: {devices}")

    @classmethod
    def supports(cls, model: ModelInfo) -> Support:
        if model.architecture not in SUPPORTED_ARCHITECTURES:
            return Support(
                False,
                f"OpenVINO's GGUF reader does not know the {model.architecture} architecture "
                f"(it reads {', '.join(sorted(SUPPORTED_ARCHITECTURES))})",
            )
        unsupported = sorted(set(model.tensor_types) - SUPPORTED_TENSOR_TYPES)
        if unsupported:
            return Support(False, f"OpenVINO's GGUF reader cannot read {', '.join(unsupported)} weights")
        return Support(True, f"OpenVINO reads {model.architecture} GGUF files in {model.quantization}")

    @classmethod
    def estimate_memory(cls, model: ModelInfo, options: LoadOptions) -> MemoryEstimate:
        return estimate_openvino(model, options.context_length)

    @classmethod
    def propose(cls, ctx: PlanContext) -> list[PlanOption]:
        return placement.propose(ctx, cls)

    @classmethod
    def unavailable(cls, inventory: HardwareInventory, choice: str) -> str | None:
        return "OpenVINO GenAI is not installed" if inventory.openvino is None else None

    @classmethod
    def idle_devices(cls, ctx: PlanContext) -> list[str]:
        return placement.idle_accelerators(ctx)

    @classmethod
    def route_reason(cls, ctx: PlanContext, route: str, chosen: PlanOption) -> str | None:
        return placement.cpu_route_reason(ctx, cls, chosen) if route == OPENVINO_CPU else None

    # --- instance ----------------------------------------------------------------------------------------
    @property
    def context_length(self) -> int:
        return self._context_length

    @property
    def device(self) -> str:
        return self._device

    @property
    def notes(self) -> tuple[str, ...]:
        notes = []
        if self._formatter and self._formatter.fallback_reason:
            notes.append(f"Using the ChatML prompt format because {self._formatter.fallback_reason}.")
        if self._max_prompt_tokens is not None:
            notes.append(f"The {self._device} takes prompts of up to {self._max_prompt_tokens} tokens.")
        return tuple(notes)

    def load(self, model: ModelInfo, options: LoadOptions) -> Iterator[LoadProgress]:
        self.close()
        device = options.device or "CPU"
        yield LoadProgress(0.05, f"Compiling {model.path.name} for the {device} (the first time takes longest)")
        from backends.hardware import block_telemetry_modules

        block_telemetry_modules()
        try:
            import openvino_genai
        except (ImportError, OSError) as exc:
            raise ModelLoadError(f"OpenVINO GenAI cannot be loaded: {exc}.", "Run `make setup`.") from exc
        config: dict[str, Any] = {}
        if options.cache_dir is not None:
            Path(options.cache_dir).mkdir(parents=True, exist_ok=True)
            config["CACHE_DIR"] = str(options.cache_dir)
        max_prompt = options.max_prompt_tokens
        if device.startswith("NPU"):
            max_prompt = max_prompt or min(NPU_MAX_PROMPT_TOKENS, options.context_length - NPU_MIN_RESPONSE_TOKENS)
            config |= {"MAX_PROMPT_LEN": max_prompt, "MIN_RESPONSE_LEN": NPU_MIN_RESPONSE_TOKENS}
        # The template's renderer process starts now, so it is up by the time the model is and the probe runs.
        formatter = ChatFormatter(model.chat_template, model.bos_token, model.eos_token)
        # OpenVINO's tokenizer makes the vocabulary's special tokens of text too: a passage or a tool's result that
        # spells one out must stay text (backends/turn_markers.py).
        formatter.defuser = Defuser(marker_texts(special_token_texts(model.path)))
        try:
            pipe = openvino_genai.LLMPipeline(str(model.path), device, **config)
        except RuntimeError as exc:
            formatter.close()
            raise ModelLoadError(
                f"OpenVINO could not load {model.path.name} on {device}: {_first_line(exc)}.",
                "Update the device driver, or choose another backend with --backend llamacpp.",
                page_remedy="Update the device driver, or pick llama.cpp under Backend in the Hardware tab.",
            ) from exc
        formatter.probe()
        self._pipe = pipe
        self._tokenizer = pipe.get_tokenizer()
        self._formatter = formatter
        self._device = device
        self._context_length = min(options.context_length, model.trained_context_length)
        self._max_prompt_tokens = max_prompt
        yield LoadProgress(1.0, "Model ready")

    def _require(self) -> tuple[Any, Any, ChatFormatter]:
        if self._pipe is None or self._formatter is None:
            raise ModelNotReady("No model is loaded.", "Wait for the model to finish loading, or pick a model.")
        return self._pipe, self._tokenizer, self._formatter

    def _encode(self, text: str, special: bool) -> int:
        _, tokenizer, _ = self._require()
        ids = tokenizer.encode(text, add_special_tokens=special).input_ids
        return int(ids.get_shape()[-1])

    def count_tokens(self, text: str) -> int:
        return self._encode(text, special=False)

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        _, _, formatter = self._require()
        return self._encode(formatter.render_chat(messages), special=False)

    def stream_chat(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]:
        _, _, formatter = self._require()
        prompt = formatter.render_chat(messages)  # earlier tool calls written into plain turns (no grammar here)
        # One LLMPipeline answers one prompt at a time: later requests wait here, in arrival order.
        with self._lock:
            yield from without_thinking(self._generate(prompt, params, cancel), opens_thinking(prompt))

    def stream_completion(self, prompt: str, params: GenerationParams, cancel: CancelToken) -> Iterator[ChatEvent]:
        with self._lock:
            yield from self._generate(prompt, params, cancel)

    def _generate(self, prompt: str, params: GenerationParams, cancel: CancelToken) -> Iterator[ChatEvent]:
        import openvino_genai

        pipe, _, _ = self._require()
        started = time.perf_counter()
        prompt_tokens = self._encode(prompt, special=False)
        limit = self._max_prompt_tokens or self._context_length - 1
        if prompt_tokens > limit:
            where = (
                f"the {self._device} takes at most {limit}"
                if self._max_prompt_tokens
                else (f"the context window holds {self._context_length}")
            )
            raise ContextTooLong(
                f"The prompt is {prompt_tokens} tokens; {where}.",
                "Shorten the message or start a new conversation"
                + (", or run on the GPU or CPU (--device)." if self._max_prompt_tokens else "."),
            )
        config = _generation_config(params, max(1, min(params.max_new_tokens, self._context_length - prompt_tokens)))
        pieces: list[str] = []
        first_at: list[float] = []
        stopped = threading.Event()
        output = _Handoff()
        stops = StopScanner(params.stop)

        def streamer(text: str) -> Any:
            if not first_at:
                first_at.append(time.perf_counter())
            pieces.append(text)
            if shown := stops.feed(text):
                output.put(shown)
            if stops.stopped:
                return openvino_genai.StreamingStatus.STOP
            if cancel.cancelled:
                stopped.set()
                return openvino_genai.StreamingStatus.STOP
            return openvino_genai.StreamingStatus.RUNNING

        worker = threading.Thread(
            target=output.run, args=(lambda: pipe.generate(prompt, config, streamer),), name="hearth-openvino"
        )
        worker.start()
        drained = False
        try:
            for text in output.items():
                yield TextDelta(text)
            drained = True
            if tail := stops.flush():
                yield TextDelta(tail)
        finally:
            if not drained:
                cancel.cancel()  # the consumer went away: let the device stop at the next token
            worker.join()
        if output.error is not None:
            raise GenerationError(
                f"OpenVINO stopped in the middle of the answer ({_first_line(output.error)}).",
                "Send the message again; if it keeps failing, switch to the llama.cpp backend.",
            ) from output.error
        finished = time.perf_counter()
        text = "".join(pieces)
        completion = self._encode(text, special=False) if text else 0
        reason: FinishReason
        if stopped.is_set():
            reason = "cancelled"
        elif stops.stopped:
            reason = "stop"
        elif completion >= config.max_new_tokens:
            reason = "length"
        else:
            reason = "stop"
        ttft = (first_at[0] if first_at else finished) - started
        yield Usage(prompt_tokens, completion, ttft * 1000, (finished - started) * 1000)
        yield Finished(reason)

    def close(self) -> None:
        self._pipe = None
        self._tokenizer = None
        if self._formatter is not None:
            self._formatter.close()
        self._formatter = None
        self._device = ""
        self._context_length = 0
        self._max_prompt_tokens = None


class _Handoff:
    """Runs the blocking ``generate`` call in a worker thread and hands its streamed pieces to the caller."""

    def __init__(self) -> None:
        import queue

        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self.error: BaseException | None = None

    def put(self, text: str) -> None:
        self._queue.put(text)

    def run(self, generate: Any) -> None:
        try:
            generate()
        except Exception as exc:  # handed to the caller's thread, which raises it as a typed error
            self.error = exc
        finally:
            self._queue.put(None)

    def items(self) -> Iterator[str]:
        while (item := self._queue.get()) is not None:
            yield item


def _generation_config(params: GenerationParams, max_new_tokens: int) -> Any:
    """OpenVINO GenAI's settings for one answer: greedy at temperature 0, else sampled (top-p, top-k 40)."""
    import openvino_genai

    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = max_new_tokens
    config.apply_chat_template = False  # the prompt is already rendered by Hearth's sandboxed template
    config.repetition_penalty = params.repeat_penalty
    if params.temperature > 0:
        config.do_sample = True
        config.temperature = params.temperature
        config.top_p = params.top_p
        config.top_k = 40
        if params.seed is not None:
            config.rng_seed = params.seed
    else:
        config.do_sample = False
    return config


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
