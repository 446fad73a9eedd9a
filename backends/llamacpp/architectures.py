"""Which model architectures the installed llama.cpp can load, asked of llama.cpp itself, without loading a model.

libllama exports ``llm_arch_name(llm_arch)``, a C++ function over the table of names that its loader matches a
GGUF's ``general.architecture`` against. The enum runs from 0 up to ``LLM_ARCH_UNKNOWN``, named "(unknown)", and
past it the function answers "unknown"; so asking for each number in turn lists exactly the names this build
knows, in microseconds, with no file parsed. (Scanning the library's bytes for the names is not reliable: the
linker stores a name such as "qwen2" as the tail of another one.) A build that does not export the function
(another platform's C++ name mangling, a future rename) answers None: Hearth then cannot tell before loading.
"""

from __future__ import annotations

import ctypes
import functools

_SYMBOL = "_Z13llm_arch_name8llm_arch"  # llm_arch_name(llm_arch) in the Itanium C++ ABI (Linux, macOS)
_END_NAMES = frozenset({"(unknown)", "unknown", ""})
_NOT_MODELS = frozenset({"clip"})  # a placeholder for llama.cpp's quantizer; the loader does not run it as a model
_MOST = 4096  # far more architectures than exist; a guard against a build whose table never ends


@functools.cache
def llamacpp_architectures() -> frozenset[str] | None:
    """The architecture names the installed llama.cpp loads, or None when that cannot be known here."""
    try:
        from llama_cpp import llama_cpp as bindings

        name_of = getattr(bindings._lib, _SYMBOL)
    except (ImportError, OSError, AttributeError):
        return None
    name_of.restype = ctypes.c_char_p
    name_of.argtypes = [ctypes.c_int]
    names: set[str] = set()
    for number in range(_MOST):
        raw = name_of(number)
        name = raw.decode("utf-8", errors="replace") if raw else ""
        if name in _END_NAMES:
            break
        names.add(name)
    return frozenset(names - _NOT_MODELS) or None
