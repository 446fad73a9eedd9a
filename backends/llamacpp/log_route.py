"""llama.cpp's log lines sent to Python logging, once per process, whatever opened llama.cpp first.

llama.cpp writes its loading report (every metadata key, every tensor buffer: about a hundred lines a model) to the
process's stderr unless a log callback is set. Every way Hearth opens a model in a process sets it first: the engine
process's backend, and the vocabulary alone that tuning reads in the page's process, whose stderr is the terminal
``hearth ui`` runs in.

Two kinds of lines are expected and lowered: the failure llama.cpp logs for a decode Hearth asked to stop, and the
warnings it gives for each adapted weight while a LoRA adapter loads. The threads doing either are marked here.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from typing import Any

log = logging.getLogger("llama.cpp")
# ggml log levels: 1 debug, 2 info, 3 warn, 4 error, 5 continuation of the previous line.
_GGML_LEVELS = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_log_callback: Any = None
_routing = threading.Lock()

# Threads whose llama_decode is unwinding from an abort Hearth asked for: llama.cpp reports every abort as a
# failure ("llama_decode: failed to decode, ret = 2", at ERROR), which for a Stop is no failure at all.
unwinding_threads: set[int] = set()
# Threads loading a LoRA adapter: llama.cpp warns for each adapted weight whose base is stored in a repacked
# layout ("cannot use buft 'CPU_REPACK', fallback to CPU"), which is how adapters always work on such weights.
adapter_threads: set[int] = set()


def loading_adapter() -> bool:
    """Whether this thread is inside llama_adapter_lora_init (its warnings are expected and not the user's)."""
    return threading.get_ident() in adapter_threads


def unwinding_abort() -> bool:
    """Whether this thread is inside a llama_decode that Hearth asked to stop (its log lines are expected)."""
    return threading.get_ident() in unwinding_threads


def route_llama_logs() -> None:
    """Send llama.cpp's C-level log lines and llama-cpp-python's own prints to Python logging (once per
    process). Its prints are redirected through its module's ``print`` name only, so no other thread's output
    is touched."""
    global _log_callback
    with _routing:
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
            if unwinding_abort():
                # A Stop ended this evaluation on purpose; llama.cpp reports every abort as a failed decode.
                python_level = min(python_level, logging.DEBUG)
            elif loading_adapter():
                python_level = min(python_level, logging.INFO)
            message = text.decode("utf-8", errors="replace").rstrip()
            if message:
                log.log(python_level, "%s", message)

        _log_callback = llama_cpp.llama_log_callback(forward)  # the reference keeps ctypes from freeing it
        llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
