"""Where llama.cpp may keep a model's weights: not in its AMX buffers.

On CPUs with Intel AMX (Sapphire Rapids and later Xeons), llama.cpp repacks quantized weights into "AMX" buffers,
and its AMX matrix multiply then crashes the process in the first decode of more than one token (seen here:
SmolLM2-135M Q4_1, SIGSEGV in the first prompt; upstream, ggml-org/llama.cpp#20824, closed without a fix). With
extra buffer types off, llama.cpp keeps the weights as they are in the file and the same machine answers normally.
So on such a CPU every llama.cpp model Hearth loads (the engine, the raw side of benchmarks, perplexity) is loaded
with ``use_extra_bufts`` off; elsewhere llama.cpp's own choice (CPU weight repacking) stays.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

AMX_FLAG = "amx_int8"
_patching = threading.Lock()


def extra_buffers_safe(isa_flags: Iterable[str]) -> bool:
    """Whether llama.cpp's extra weight buffers can be used on a CPU with these /proc/cpuinfo flags."""
    return AMX_FLAG not in set(isa_flags)


@functools.cache
def this_cpu_allows_extra_buffers() -> bool:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return True  # not Linux: llama.cpp decides (its AMX path is only built for Linux x86 here)
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return extra_buffers_safe(value.split())
    return True


def apply(model_params: Any) -> Any:
    """Turn llama.cpp's extra buffer types off in ``model_params`` where this CPU needs it; returns them."""
    if not this_cpu_allows_extra_buffers():
        model_params.use_extra_bufts = False
    return model_params


@contextlib.contextmanager
def for_llama_class(tensor_overrides: Any = None) -> Iterator[None]:
    """While inside, ``llama_cpp.Llama(...)`` loads with the same buffer rule, and with ``tensor_overrides`` (a
    ctypes array of llama.cpp's tensor buffer overrides) when given: the class takes no such arguments; it asks
    ``llama_model_default_params`` for its starting parameters, so that is wrapped for the duration."""
    if this_cpu_allows_extra_buffers() and tensor_overrides is None:
        yield
        return
    import ctypes
    import importlib

    # The module the class calls it through (``llama_cpp.llama`` imports ``llama_cpp.llama_cpp as llama_cpp``).
    bindings: Any = importlib.import_module("llama_cpp.llama_cpp")

    def starting_params() -> Any:
        params = apply(original())
        if tensor_overrides is not None:
            params.tensor_buft_overrides = ctypes.cast(tensor_overrides, ctypes.c_void_p)
        return params

    with _patching:
        original = bindings.llama_model_default_params
        bindings.llama_model_default_params = starting_params
        try:
            yield
        finally:
            bindings.llama_model_default_params = original


def open_llama(tensor_overrides: Any = None, **kwargs: Any) -> Any:
    """``llama_cpp.Llama(**kwargs)`` under the buffer rule, with ``tensor_overrides`` when given."""
    from llama_cpp import Llama

    with for_llama_class(tensor_overrides):
        return Llama(**kwargs)
