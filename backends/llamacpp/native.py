"""The llama.cpp C API, wrapped just enough for the batching backend: a model with one multi-sequence context,
its tokenizer, and a reusable token batch. Everything here owns native memory and frees it in ``close()``.

Why the C API and not ``llama_cpp.Llama``: ``Llama`` always creates its own single-sequence context (with a KV
cache of its ``n_ctx``) and batch, which a multi-sequence engine would have to allocate a second time beside
it. Loading through the C API takes the same few model parameters ``Llama`` sets (GPU layers, tensor split,
main GPU, mmap) and nothing is allocated twice.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.base import AdapterUse, LoadOptions
from backends.llamacpp import buffers as llamacpp_buffers
from backends.llamacpp.caches.state_cells import for_streams
from backends.llamacpp.caches.stream_join import join_apart, span_apart
from backends.llamacpp.log_route import adapter_threads, route_llama_logs, unwinding_threads
from models.shared.errors import AdapterError, ModelLoadError

# What every context of Hearth's is created with, and what benchmarks give raw llama-cpp-python to match it.
FLASH_ATTENTION = True

# Tokens one llama_decode call takes (and one graph evaluates, n_ubatch): llama.cpp's default, large enough
# that a prompt is read at full speed, small enough to bound one step's time.
BATCH_TOKENS = 512
# llama.cpp's own "every layer" value for n_gpu_layers (what llama-cpp-python passes for -1).
ALL_LAYERS = 0x7FFFFFFF

# LoRA adapters kept loaded beside the model (a few MB each for small models); the least recently used goes first.
ADAPTERS_KEPT = 4

# llama_decode's status when its abort callback asked it to stop between two graph nodes (GGML_STATUS_ABORTED).
ABORTED = 2

_backend_lock = threading.Lock()
_backend_ready = False


def _init_backend() -> None:
    global _backend_ready
    import llama_cpp

    with _backend_lock:
        if not _backend_ready:
            llama_cpp.llama_backend_init()
            _backend_ready = True


# ggml's type numbers for the context-cache types Hearth offers (ggml.h: GGML_TYPE_F16, _Q4_0, _Q8_0)
_CACHE_TYPES = {"f16": 1, "q4_0": 2, "q8_0": 8}


@dataclass(frozen=True)
class ContextShape:
    """What the context holds: ``slots`` sequences of ``context_length`` tokens each (llama.cpp's
    ``n_seq_max`` and ``n_ctx_seq``; it rounds the latter up to a multiple of 256)."""

    slots: int
    context_length: int


# With one slot, the cache is one stream shared by the slot's sequence (0) and a scratch sequence (1) that holds
# nothing between two calls: a span of the slot's cells is copied to it to be saved alone, and a saved span is loaded
# into it, moved to its place and handed to the slot — in one stream both are changes of the cells' sequence ids,
# not copies of keys and values (``NativeModel.span_state``, ``join_span``).
SCRATCH = 1


def _context_params(options: LoadOptions, slots: int) -> Any:
    """llama.cpp's context parameters for ``slots`` sequences of ``options.context_length`` tokens each."""
    import llama_cpp

    context_params = llama_cpp.llama_context_default_params()
    context_params.n_ctx = slots * options.context_length
    context_params.n_seq_max = slots
    # One KV stream per sequence: each slot has its whole context_length of its own, and attention reads
    # only its own cells (a unified cache would make every token attend over all slots' cells). One slot has
    # one stream either way; its scratch sequence shares it and holds cells only for the length of a call.
    context_params.kv_unified = slots == 1
    if slots == 1:
        context_params.n_seq_max = SCRATCH + 1
    context_params.n_batch = BATCH_TOKENS
    context_params.n_ubatch = BATCH_TOKENS
    context_params.n_threads = options.threads
    context_params.n_threads_batch = options.threads
    # Flash attention everywhere (FLASH_ATTENTION): on GPUs it saves memory and time; on this project's 2-core
    # CPU it read a documents prompt 4-7% faster than llama.cpp's other path (bench/prefill_settings.py); a
    # quantized V cache needs it; and it attends for each position alone, so a token's attention does not
    # depend on what else the step holds (with weights whose matrix kernel does not change with the step's
    # size either, as the embedded model's, prompt lookup keeps exactly the greedy text).
    context_params.flash_attn_type = (
        llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if FLASH_ATTENTION else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    )
    cache_type = _CACHE_TYPES[options.kv_cache_type]
    context_params.type_k = cache_type
    context_params.type_v = cache_type
    return context_params


class NativeModel:
    """A loaded GGUF and a context whose KV cache keeps one separate stream per slot."""

    def __init__(self, path: Path, options: LoadOptions) -> None:
        import llama_cpp

        _init_backend()
        if options.workers:  # their devices join llama.cpp's list before the model is placed on devices
            from backends.workers.link import local_endpoints
            from backends.workers.rpc import attach_workers

            attach_workers(local_endpoints(options.workers, options.worker_links))
        self._tensor_split: Any = None
        self._nudge: TokenBatch | None = None  # the one-token batch a join with several slots evaluates
        self._overrides: Any = None
        self.model: Any = None
        self.ctx: Any = None
        # Loading through the C API redirects no file descriptor (llama-cpp-python's verbose=False points the
        # process's stdout/stderr at /dev/null while it loads, swallowing other threads' output); llama.cpp's
        # log lines, buffer sizes included, reach `logging` through route_llama_logs().
        model_params = llamacpp_buffers.apply(llama_cpp.llama_model_default_params())
        model_params.n_gpu_layers = ALL_LAYERS if options.gpu_layers < 0 else options.gpu_layers
        model_params.split_mode = (
            llama_cpp.LLAMA_SPLIT_MODE_NONE if options.one_gpu else llama_cpp.LLAMA_SPLIT_MODE_LAYER
        )
        model_params.main_gpu = options.main_gpu
        model_params.load_mode = llama_cpp.LLAMA_LOAD_MODE_MMAP
        if options.tensor_split:
            if len(options.tensor_split) > llama_cpp.LLAMA_MAX_DEVICES:
                raise ModelLoadError(
                    f"This llama.cpp build splits a model across at most {llama_cpp.LLAMA_MAX_DEVICES} devices.",
                    "Use fewer GPUs for this model.",
                )
            # llama.cpp reads the array while loading; the reference keeps ctypes from freeing it before then.
            self._tensor_split = (ctypes.c_float * llama_cpp.LLAMA_MAX_DEVICES)(*options.tensor_split)
            model_params.tensor_split = self._tensor_split
        if options.output_on_cpu:
            from backends.workers.rpc import output_on_cpu_overrides

            self._overrides = output_on_cpu_overrides()  # read while loading, like the split
            model_params.tensor_buft_overrides = ctypes.cast(self._overrides, ctypes.c_void_p)
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode("utf-8"), model_params)
        if not self.model:
            raise ModelLoadError(
                f"llama.cpp could not load {path.name}.",
                "The file may use an architecture this llama.cpp build does not know; try another model.",
            )
        self.vocab: Any = llama_cpp.llama_model_get_vocab(self.model)

        slots = max(options.slots, 1)
        context_params = _context_params(options, slots)
        self.ctx = llama_cpp.llama_init_from_model(self.model, context_params)
        if not self.ctx:
            self.close()
            raise ModelLoadError(
                f"llama.cpp could not create a context of {slots} x {options.context_length} tokens for {path.name}.",
                "Lower the context (--context) or the number of parallel answers (--slots).",
                page_remedy="Close other programs and load it again, or pick a smaller model in the Models tab.",
            )
        self.memory: Any = llama_cpp.llama_get_memory(self.ctx)
        self.shape = ContextShape(slots=slots, context_length=int(llama_cpp.llama_n_ctx_seq(self.ctx)))
        # A span of cells can be saved alone and joined elsewhere where positions can be moved (llama.cpp turns the
        # keys again); with a stream per slot it travels as bytes (``stream_join``), and a state whose values are
        # transposed (no flash attention) is not laid out there, so its passages are read instead.
        self.can_join = bool(llama_cpp.llama_memory_can_shift(self.memory))
        self.streams = slots  # KV streams: one slot's unified cache, or a stream per slot
        self.turns_later = slots == 1  # a moved span's keys turned at the next llama_decode (else at once)
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))
        self.vocab_size = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        # Whether a sequence's last tokens can be dropped alone (a transformer's cache can; a recurrent state
        # cannot be rewound): prompt lookup drops the guesses the model did not agree with.
        self.can_trim = not (
            llama_cpp.llama_model_is_recurrent(self.model) or llama_cpp.llama_model_is_hybrid(self.model)
        )
        self._pieces: dict[int, bytes] = {}
        self._stop_when: Callable[[], bool] | None = None
        self._decoding_thread = 0
        # Kept on the instance so ctypes never frees it while llama.cpp holds the pointer.
        self._abort_callback: Any = llama_cpp.ggml_abort_callback(self._should_abort)
        self._no_callback: Any = llama_cpp.ggml_abort_callback()  # a NULL function pointer: no callback
        self._adapters: dict[tuple[str, int], Any] = {}  # loaded LoRA adapters, least recently used first
        self._adapter_in_use: tuple[str, int] | None = None

    # --- tokenizer: reads only the vocabulary, so any thread may call it while another decodes -------------
    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        return tokenize_with(self.vocab, text, add_special, parse_special)

    def piece(self, token: int) -> bytes:
        """The bytes of one token, without special tokens' text (a UTF-8 character may span several tokens)."""
        cached = self._pieces.get(token)
        if cached is not None:
            return cached
        import llama_cpp

        size = 32
        while True:
            buffer = ctypes.create_string_buffer(size)
            written = llama_cpp.llama_token_to_piece(self.vocab, token, buffer, size, 0, False)
            if written >= 0:
                break
            size = -written
        piece = buffer.raw[:written]
        self._pieces[token] = piece
        return piece

    def is_end_of_generation(self, token: int) -> bool:
        import llama_cpp

        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    # --- the context: only the scheduler thread touches these ---------------------------------------------
    def forget(self, sequence: int, from_position: int = 0) -> None:
        """Drop a sequence's cached tokens from ``from_position`` on (all of them from 0)."""
        import llama_cpp

        if not llama_cpp.llama_memory_seq_rm(self.memory, sequence, from_position, -1):
            # Partial removal can fail only for recurrent models; dropping the whole sequence never does.
            llama_cpp.llama_memory_seq_rm(self.memory, sequence, -1, -1)

    def set_threads(self, threads: int) -> None:
        """Compute with ``threads`` threads from the next llama_decode on (the scheduler thread alone calls it)."""
        import llama_cpp

        llama_cpp.llama_set_n_threads(self.ctx, threads, threads)

    def copy_sequence(self, source: int, target: int, stop: int = -1) -> None:
        """Make ``target``'s cache a copy of ``source``'s positions before ``stop`` (all of them with -1); its own is
        dropped. With a cache per sequence llama.cpp copies the whole stream at the start of the next llama_decode,
        before anything is written, so until then neither sequence's keys and values may be written or read
        (``restore_sequence``, ``sequence_state``); dropping cells is safe."""
        import llama_cpp

        llama_cpp.llama_memory_seq_cp(self.memory, source, target, -1, -1)
        if stop >= 0:
            self.forget(target, stop)

    def sequence_state(self, sequence: int) -> bytes:
        """The keys and values a sequence's cache holds, as llama.cpp writes them (``llama_state_seq_get_data``)."""
        import llama_cpp

        size = int(llama_cpp.llama_state_seq_get_size(self.ctx, sequence))
        buffer = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_seq_get_data(self.ctx, buffer, size, sequence))
        return ctypes.string_at(buffer, written)

    def restore_sequence(self, sequence: int, state: bytes) -> bool:
        """Replace a sequence's cache with ``state`` (from :meth:`sequence_state`); False, with the sequence left
        empty, when llama.cpp refuses it (another model's, or more tokens than a slot holds)."""
        import llama_cpp

        self.forget(sequence)
        state = for_streams(state, self.streams)
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if int(llama_cpp.llama_state_seq_set_data(self.ctx, buffer, len(state), sequence)) != len(state):
            self.forget(sequence)
            return False
        return True

    def span_state(self, sequence: int, start: int, stop: int) -> bytes:
        """The keys and values of ``sequence``'s cells at positions ``start`` to ``stop`` (exclusive), alone, as
        llama.cpp writes a sequence's state: copied to the scratch sequence (in one stream, only the cells'
        sequence ids change), written, and dropped there. Only between two decodes, when no move is pending."""
        import llama_cpp

        if not self.can_join:
            raise RuntimeError("spans cannot be saved with this model's cache")
        if self.streams > 1:
            return span_apart(self, sequence, start, stop)
        llama_cpp.llama_memory_seq_rm(self.memory, SCRATCH, -1, -1)
        llama_cpp.llama_memory_seq_cp(self.memory, sequence, SCRATCH, start, stop)
        try:
            return self.sequence_state(SCRATCH)
        finally:
            llama_cpp.llama_memory_seq_rm(self.memory, SCRATCH, -1, -1)

    def join_span(self, sequence: int, state: bytes, computed_at: int, place_at: int, skip: int = 0) -> bool:
        """Append a span saved by :meth:`span_state` (its first position was ``computed_at``) to ``sequence`` with
        its first token at position ``place_at``: loaded into the scratch sequence, moved (llama.cpp turns its keys
        for the new positions at the next decode) and handed over. Its first ``skip`` tokens are left out (the
        sequence has read them again there), so ``place_at + skip`` must follow the sequence's last position; an
        empty ``sequence`` may begin anywhere. False, with ``sequence`` unchanged, when llama.cpp refuses the
        state."""
        import llama_cpp

        if not self.can_join:
            raise RuntimeError("spans cannot be joined with this model's cache")
        last = int(llama_cpp.llama_memory_seq_pos_max(self.memory, sequence))
        if last >= 0 and place_at + skip != last + 1:
            raise ValueError(f"a span must follow the sequence: position {place_at + skip}, expected {last + 1}")
        if self.streams > 1:
            self._nudge = self._nudge or TokenBatch(1)
            return join_apart(self, self._nudge, sequence, state, computed_at, place_at, skip)
        if not self.restore_sequence(SCRATCH, state):
            return False
        if skip:
            # Cut off, and loaded again without them: the cells left then lie together right after the sequence's,
            # where reading would put them. (Left where they were, the first tokens' cells would be a gap that
            # later tokens fill, and attention, which adds the cells up in the order they lie, would round
            # otherwise than reading.)
            llama_cpp.llama_memory_seq_rm(self.memory, SCRATCH, computed_at, computed_at + skip)
            if not self.restore_sequence(SCRATCH, self.sequence_state(SCRATCH)):
                return False
        if place_at != computed_at:
            llama_cpp.llama_memory_seq_add(self.memory, SCRATCH, -1, -1, place_at - computed_at)
        llama_cpp.llama_memory_seq_cp(self.memory, SCRATCH, sequence, -1, -1)
        llama_cpp.llama_memory_seq_rm(self.memory, SCRATCH, -1, -1)
        return True

    def use_adapter(self, adapter: AdapterUse | None) -> None:
        """Answer with ``adapter`` from the next llama_decode on (None: the base model alone). Switching loads the
        adapter's file once and keeps it; the model's own weights stay as they are."""
        import llama_cpp

        if adapter is None:
            status = llama_cpp.llama_set_adapters_lora(self.ctx, None, 0, None)
            self._adapter_in_use = None
        else:
            key = (adapter.path, adapter.version)
            handle = self._adapter_handle(key)
            handles = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(handle)
            scales = (ctypes.c_float * 1)(adapter.scale)
            status = llama_cpp.llama_set_adapters_lora(self.ctx, handles, 1, scales)
            self._adapter_in_use = key
        if status != 0:
            raise AdapterError(f"llama.cpp could not apply the adapter (status {status}).", "Try another adapter.")

    def _adapter_handle(self, key: tuple[str, int]) -> Any:
        import llama_cpp

        handle = self._adapters.pop(key, None)
        if handle is None:
            adapter_threads.add(threading.get_ident())
            try:
                handle = llama_cpp.llama_adapter_lora_init(self.model, key[0].encode("utf-8"))
            finally:
                adapter_threads.discard(threading.get_ident())
            if not handle:
                raise AdapterError(
                    f"llama.cpp could not load the adapter {Path(key[0]).name}.",
                    "It may be damaged or made for another model; train it again with hearth tune.",
                    page_remedy="It may be damaged or made for another model; train it again in the Tuning tab.",
                )
        self._adapters[key] = handle
        while len(self._adapters) > ADAPTERS_KEPT:
            oldest = next(k for k in self._adapters if k != self._adapter_in_use and k != key)
            llama_cpp.llama_adapter_lora_free(self._adapters.pop(oldest))
        return handle

    def decode(self, batch: TokenBatch, stop_when: Callable[[], bool] | None = None) -> int:
        """llama_decode's status: 0 is success, ``ABORTED`` when ``stop_when`` answered True between two nodes
        of the graph (llama.cpp then drops what this call had written to the cache).

        The callback is installed only for this call: llama.cpp asks it after every graph node, hundreds of
        times per call, which costs little next to reading a prompt piece but would slow every answer token."""
        import llama_cpp

        if stop_when is None:
            return int(llama_cpp.llama_decode(self.ctx, batch.native))
        self._stop_when = stop_when
        self._decoding_thread = threading.get_ident()
        llama_cpp.llama_set_abort_callback(self.ctx, self._abort_callback, None)
        try:
            return int(llama_cpp.llama_decode(self.ctx, batch.native))
        finally:
            llama_cpp.llama_set_abort_callback(self.ctx, self._no_callback, None)
            self._stop_when = None
            unwinding_threads.discard(self._decoding_thread)

    def _should_abort(self, _data: Any) -> bool:
        """llama.cpp's abort callback (called from inside llama_decode): True stops the evaluation."""
        stop_when = self._stop_when
        if stop_when is None or not stop_when():
            return False
        unwinding_threads.add(self._decoding_thread)  # the failure llama.cpp is about to log is this requested stop
        return True

    def close(self) -> None:
        import llama_cpp

        if self._nudge is not None:
            self._nudge.close()
            self._nudge = None
        if self.ctx:
            llama_cpp.llama_free(self.ctx)
        if self.model:
            llama_cpp.llama_model_free(self.model)
        self.ctx = None
        self.model = None
        self.memory = None


def tokenize_with(vocab: Any, text: str, add_special: bool, parse_special: bool) -> list[int]:
    import llama_cpp

    data = text.encode("utf-8")
    capacity = len(data) + 8  # a token covers at least one byte, plus the special tokens added around
    while True:
        tokens = (llama_cpp.llama_token * capacity)()
        count = llama_cpp.llama_tokenize(vocab, data, len(data), tokens, capacity, add_special, parse_special)
        if count >= 0:
            return list(tokens[:count])
        capacity = -count  # too small: llama.cpp says how many it needs


class Vocabulary:
    """Only a model's tokenizer (llama.cpp loads the vocabulary and no weights): how the trainer tokenizes, so
    its token ids are exactly those chat sends."""

    def __init__(self, path: Path) -> None:
        import llama_cpp

        _init_backend()
        route_llama_logs()  # its loading report goes to logging, not the terminal of the process reading it
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self.model: Any = llama_cpp.llama_model_load_from_file(str(path).encode("utf-8"), params)
        if not self.model:
            raise ModelLoadError(f"llama.cpp could not read the vocabulary of {path.name}.", "Try another model.")
        self.vocab: Any = llama_cpp.llama_model_get_vocab(self.model)

    def tokenize(self, text: str, add_special: bool, parse_special: bool = True) -> list[int]:
        return tokenize_with(self.vocab, text, add_special, parse_special)

    def close(self) -> None:
        import llama_cpp

        if self.model:
            llama_cpp.llama_model_free(self.model)
        self.model = None


class TokenBatch:
    """A llama_batch allocated once and refilled every step; each token belongs to exactly one sequence."""

    def __init__(self, capacity: int) -> None:
        import llama_cpp

        self.capacity = capacity
        self.native: Any = llama_cpp.llama_batch_init(capacity, 0, 1)
        self.size = 0

    def clear(self) -> None:
        self.size = 0
        self.native.n_tokens = 0

    def add(self, token: int, position: int, sequence: int, logits: bool) -> int:
        """Append one token; returns its row, which is where its logits are read when ``logits`` is true."""
        if self.size >= self.capacity:
            raise IndexError("the batch is full")
        row = self.size
        native = self.native
        native.token[row] = token
        native.pos[row] = position
        native.n_seq_id[row] = 1
        native.seq_id[row][0] = sequence
        native.logits[row] = logits
        self.size += 1
        native.n_tokens = self.size
        return row

    def close(self) -> None:
        import llama_cpp

        if self.native is not None:
            llama_cpp.llama_batch_free(self.native)
            self.native = None
