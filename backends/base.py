"""The backend contract.

A backend runs one GGUF model on some hardware. The class-level methods are cheap and pure, so selection can
ask every registered backend about every model: ``availability`` (can it run on this machine at all),
``supports`` (can it run this model), ``estimate_memory`` (what would it cost) and ``propose`` (where it would run
it: the plan's parts are in ``backends/plan.py``). Instances do the work:
``load`` yields progress, ``stream_chat`` and ``stream_completion`` yield typed events, ``count_tokens`` uses
the model's real tokenizer, and ``close`` is idempotent.

Several threads may stream at once. A backend whose ``slots`` is above one answers them together (the llama.cpp
backend batches its sequences); the others answer one at a time, in arrival order. Backends run inside an
engine process supervised by ``app.services.serving.runtime``; nothing here knows about that process.

To add a backend: subclass :class:`Backend`, fill in ``name``/``label``/``capabilities`` and the methods
below, and add it to ``backends.registry``. Heavy libraries are imported inside the methods that need them.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from backends.hardware import HardwareInventory
from backends.memory import MemoryEstimate

# The chat message and the cancel token live in the lowest layer (the model files' jobs use them too); the engines'
# API names them here as well.
from models.shared.cancel import CancelToken as CancelToken
from models.shared.chat import ChatMessage as ChatMessage
from models.shared.chat import Role as Role
from models.shared.chat import ToolCall as ToolCall

if TYPE_CHECKING:
    from backends.plan import PlanContext, PlanOption
    from models.gguf import ModelInfo

FinishReason = Literal["stop", "length", "cancelled"]


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run on this machine at all, and if not, what would fix it."""

    ok: bool
    reason: str
    remedy: str = ""


@dataclass(frozen=True)
class Support:
    """Whether a backend can run a given model."""

    ok: bool
    reason: str


@dataclass(frozen=True)
class Capabilities:
    """What the UI may offer for a backend; data, not behaviour."""

    streaming: bool
    lora_hot_swap: bool
    multi_device: bool  # can split one model's layers across several devices
    embeddings: bool
    parallel: bool = False  # answers several requests at once (see ``Backend.slots``)
    grammar: bool = False  # can hold an answer to a grammar (``GenerationParams.grammar``)
    cache_types: bool = False  # keeps its context cache in f16, q8_0 or q4_0, as asked (``LoadOptions.kv_cache_type``)
    # loads the model architectures its installed build lists (llama.cpp's), and no others
    listed_architectures: bool = False


@dataclass(frozen=True)
class WorkerLink:
    """How an engine reaches a paired `hearth worker`: its control address, the certificate fingerprint pinned at
    pairing, and the token it issued (a secret: never printed)."""

    address: str
    fingerprint: str
    token: str = field(repr=False)


@dataclass(frozen=True)
class SavedCaches:
    """Where llama.cpp saves conversations' caches on disk, and the most room all of them may take (0: none saved);
    and the same for kept passages' caches."""

    folder: str
    cap_bytes: int
    passages_folder: str = ""
    passages_cap_bytes: int = 0
    passages_type: Literal["q8_0", "f16"] = "q8_0"  # how kept passages' keys and values are held (kept_state)


@dataclass(frozen=True)
class LoadOptions:
    context_length: int
    threads: int
    gpu_layers: int = 0
    seed: int = 0
    device: str = ""  # the backend's own name for the device ("CPU", "GPU.0", "NPU"); empty means its default
    # layers per device, in llama.cpp's order of its devices (it reads them as shares), when split across several
    tensor_split: tuple[float, ...] = ()
    main_gpu: int = 0
    cache_dir: str | None = None  # where a backend may keep compiled models between runs
    max_prompt_tokens: int | None = None  # a device's fixed prompt limit (an NPU's static shapes); None: the context
    slots: int = 1  # sequences answered at once; each has ``context_length`` tokens of its own
    workers: tuple[str, ...] = ()  # `hearth worker` addresses whose devices hold layers (llama.cpp's RPC)
    worker_links: tuple[WorkerLink, ...] = ()  # how to reach those of ``workers`` that are paired ones
    kv_cache_type: str = "f16"  # llama.cpp's context cache: f16, q8_0 or q4_0 (the quantized ones need flash attention)
    # llama.cpp: the output projection stays on this CPU while every layer is on workers (only the hidden state, not
    # the logits, then crosses the network per token)
    output_on_cpu: bool = False
    # llama.cpp: where conversations' caches are saved between turns and starts
    # (``backends.llamacpp.caches.saved_slots``); None keeps them in memory only
    saved_caches: SavedCaches | None = None

    @property
    def one_gpu(self) -> bool:
        """llama.cpp: layers are offloaded and no split is given, so they all go to GPU ``main_gpu``. llama.cpp is
        then loaded in its single-device mode: in its layer mode an empty split spreads the layers over every GPU
        in proportion to free memory, the GPUs the plan left out included."""
        return self.gpu_layers != 0 and not self.tensor_split


@dataclass(frozen=True)
class LoadProgress:
    fraction: float
    message: str


@dataclass(frozen=True)
class ToolSpec:
    """A function the model may call: its name, what it does, and its parameters as JSON Schema text."""

    name: str
    description: str = ""
    parameters: str = '{"type": "object", "properties": {}}'


@dataclass(frozen=True)
class AdapterUse:
    """A LoRA adapter to answer with: its GGUF file, and how strongly it applies (0 to 1)."""

    path: str
    scale: float = 1.0
    version: int = 0  # the file's modification time (ns): a file replaced under the same name is loaded anew
    name: str = ""  # what the user calls it

    @property
    def words(self) -> str:
        """How an answer names it: "support-tone", or "support-tone at 0.5" below full strength."""
        name = self.name or Path(self.path).stem
        return name if self.scale == 1.0 else f"{name} at {self.scale:g}"


@dataclass(frozen=True)
class Grammar:
    """An answer held to a grammar in llama.cpp's GBNF: each token drawn keeps the text a beginning of something
    the grammar accepts, and the answer ends once the grammar is complete (``backends.grammar`` builds them)."""

    gbnf: str
    root: str = "root"
    # Lazy: free text until one of these is written, then the grammar from it on (a tool call that may come or not).
    triggers: tuple[str, ...] = ()


# Of each passage joined from a kept cache, the share of its first tokens read again after the text now before it.
# Chosen on bench/passage_join.py's eight questions with Qwen2.5-Coder-1.5B (bench/data/passage-join.recompute.
# qwen2.5-coder-1.5b.json): with none read again, two answers came from another passage than the question's and two
# cited another passage than reading did; 0.1 still two and one; 0.2 answered each from the passage reading
# answered from (one citation number off), at 0.55x of reading's time to the first word against 0.35x with none.
DEFAULT_PASSAGE_RECOMPUTE = 0.2


@dataclass(frozen=True)
class GenerationParams:
    temperature: float = 0.7
    max_new_tokens: int = 512
    top_p: float = 0.95
    seed: int | None = None
    repeat_penalty: float = 1.1
    stop: tuple[str, ...] = ()  # the answer ends before the first of these strings; the string is not shown
    adapter: AdapterUse | None = None  # only for backends whose capabilities say lora_hot_swap
    # guess the next tokens from the prompt and verify them in one step (llama.cpp, while one answer is written)
    prompt_lookup: bool = False
    grammar: Grammar | None = None  # only for backends whose capabilities say grammar
    tools: tuple[ToolSpec, ...] = ()  # functions the prompt offers (the grammar then holds calls to them)
    # send :class:`Reading` events while the prompt is read (backends that read it in pieces; others send none)
    report_reading: bool = False
    # the conversation an answer belongs to: a cache saved from it is deleted with it (llama.cpp's saved slots)
    cache_owner: str = ""
    # texts in the prompt (the passages of an answer from documents) whose caches are kept when read and joined
    # instead of read when a later prompt holds them again (llama.cpp; other backends read them)
    passages: tuple[str, ...] = ()
    # of each joined passage, the share of its tokens (its first ones) read again after the text now before it, as
    # CacheBlend recomputes a share: the rest comes from the kept cache (``backends.llamacpp.caches.passage_join``)
    passage_recompute: float = DEFAULT_PASSAGE_RECOMPUTE


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class Usage:
    """Token counts and timings of one answer, measured by the backend."""

    prompt_tokens: int
    completion_tokens: int
    time_to_first_token_ms: float
    total_ms: float
    cached_tokens: int = 0  # leading prompt tokens found already evaluated (prefix reuse), not read again
    drafted_tokens: int = 0  # prompt lookup: tokens guessed from the prompt and the answer so far
    accepted_tokens: int = 0  # of them, the ones the model agreed with (written without a step of their own)
    joined_tokens: int = 0  # passage tokens whose kept cache was joined instead of read (``GenerationParams.passages``)

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens per second after the first one (the first one pays for the prompt)."""
        decode_ms = self.total_ms - self.time_to_first_token_ms
        if self.completion_tokens < 2 or decode_ms <= 0:
            return 0.0
        return (self.completion_tokens - 1) / (decode_ms / 1000.0)


@dataclass(frozen=True)
class Finished:
    reason: FinishReason


@dataclass(frozen=True)
class Reading:
    """How far the model has read the prompt before its first word: ``done`` of ``total`` tokens (those found in
    its cache count as read). Sent only when :attr:`GenerationParams.report_reading` asks for it."""

    done: int
    total: int


ChatEvent = TextDelta | Usage | Finished | Reading


class LinkedCancel(CancelToken):
    """A token that is cancelled by itself or by its ``parent``: for stopping one engine call from inside a job
    without ending the job (the job's own token still reaches the engine)."""

    def __init__(self, parent: CancelToken) -> None:
        super().__init__()
        self._parent = parent

    @property
    def cancelled(self) -> bool:
        return self._event.is_set() or self._parent.cancelled


class CancelSlot:
    """The token of the job now running in one place (a chat answer, an upload, a quantization): each new job
    takes a fresh token, and Stop or Cancel reaches whichever job is current."""

    def __init__(self) -> None:
        self._token = CancelToken()
        self._lock = threading.Lock()

    def start(self) -> CancelToken:
        with self._lock:
            self._token = CancelToken()
            return self._token

    def cancel(self) -> None:
        with self._lock:
            self._token.cancel()


@dataclass(frozen=True)
class BackendChoice:
    """One thing a user may ask for that a backend runs: a name for ``--backend``, the setting and the Hardware tab."""

    name: str
    label: str  # as the Hardware tab offers it
    uses_workers: bool = False  # runs on the paired workers, which are looked up when it is chosen


class Backend(ABC):
    name: ClassVar[str]
    label: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    # What a user may ask for (``--backend``, the setting, the Hardware tab) that this backend runs: its own name
    # first, then its ways of running (llama.cpp: ``cuda`` for its NVIDIA GPUs, ``pipeline`` for the workers).
    # ``backends.registry`` lists them all.
    choices: ClassVar[tuple[BackendChoice, ...]]

    # --- class-level, cheap, pure -------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def availability(cls, inventory: HardwareInventory) -> Availability: ...

    @classmethod
    @abstractmethod
    def supports(cls, model: ModelInfo) -> Support: ...

    @classmethod
    @abstractmethod
    def estimate_memory(cls, model: ModelInfo, options: LoadOptions) -> MemoryEstimate: ...

    # The routes of a plan this backend's proposals take (``backends/plan_reasons.py``): the plan says why each route
    # it weighed was or was not taken.
    routes: ClassVar[tuple[str, ...]] = ()

    @classmethod
    @abstractmethod
    def propose(cls, ctx: PlanContext) -> list[PlanOption]:
        """Where this backend can run ``ctx.model`` on ``ctx.inventory``, each option with its rank; why it cannot
        is noted in ``ctx`` (``backends/placement.py``). Pure: ``backends/selection.py`` gathers and ranks them."""

    @classmethod
    def unavailable(cls, inventory: HardwareInventory, choice: str) -> str | None:
        """Why ``choice`` (one of this backend's) cannot run anything on this machine; None when it can (a model may
        still not fit or not be read: the plan says so when it is chosen)."""
        available = cls.availability(inventory)
        return None if available.ok else available.reason

    @classmethod
    def idle_devices(cls, ctx: PlanContext) -> list[str]:
        """The devices that sit idle, named in the plan, when this backend cannot run the model."""
        return []

    @classmethod
    def route_reason(cls, ctx: PlanContext, route: str, chosen: PlanOption) -> str | None:
        """Why one of this backend's routes that offered nothing was not taken, when only the backend can say."""
        return None

    # --- instance ----------------------------------------------------------------------------------------
    @abstractmethod
    def load(self, model: ModelInfo, options: LoadOptions) -> Iterator[LoadProgress]: ...

    @abstractmethod
    def stream_chat(
        self, messages: Sequence[ChatMessage], params: GenerationParams, cancel: CancelToken
    ) -> Iterator[ChatEvent]: ...

    @abstractmethod
    def stream_completion(self, prompt: str, params: GenerationParams, cancel: CancelToken) -> Iterator[ChatEvent]:
        """Continue ``prompt`` as raw text: no chat template, the model's BOS token first if it uses one."""

    @abstractmethod
    def count_tokens(self, text: str) -> int: ...

    @abstractmethod
    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens of the whole prompt these messages render to, generation prompt included."""

    @property
    @abstractmethod
    def context_length(self) -> int: ...

    @property
    def slots(self) -> int:
        """How many answers this loaded model writes at once."""
        return 1

    @property
    def notes(self) -> tuple[str, ...]:
        """Things about the loaded model the user should know (for example a refused chat template)."""
        return ()

    def set_threads(self, threads: int | None) -> None:
        """Compute with ``threads`` CPU threads from the next step on (None: as loaded), so other work on this
        machine (indexing files) gets the rest. Backends that cannot change it while serving leave it as is."""
        return

    def forget_owner(self, owner: str) -> None:
        """The conversation ``owner`` was deleted: drop what is cached of its answers (``cache_owner``) and save
        none of it. Backends that keep no cache between answers have nothing to do."""
        return

    @abstractmethod
    def close(self) -> None:
        """Release the model. Safe to call more than once."""
