"""transformers reading a GGUF for training without doing the same work twice.

``AutoModelForCausalLM.from_pretrained(folder, gguf_file=…)`` opens the file with ``gguf.GGUFReader`` twice, once
for the configuration and once for the weights, and each opening parses every metadata field element by element,
the vocabulary's tens of thousands of strings included. Then, to match tensor names, it builds gguf's
``TensorNameMap`` for the architecture once per module of the model (about 400 times for a 30-layer model), each
build expanding every naming rule for every block. Both are pure work with the same result each time:
:func:`read_once` makes the trainer's process keep the one reader per file (as long as the file is unchanged) and one
name map per architecture and block count, for as long as the model is being read (:func:`reading_once`; a kept
reader maps the whole file, which must not stay resident while the model trains). transformers' loading itself is
unchanged, and so are the weights it makes (``bench/tuning_load.py`` compares them).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

_READERS: dict[tuple[str, int, int], Any] = {}


@contextmanager
def reading_once() -> Iterator[None]:
    """Both memories for the reading done inside; the readers kept are let go at the end."""
    read_once()
    try:
        yield
    finally:
        _READERS.clear()


def read_once() -> None:
    """Install both memories in this process (the trainer's); installing again changes nothing."""
    import gguf

    if getattr(gguf.GGUFReader, "hearth_read_once", False):
        return
    reader_class = gguf.GGUFReader

    class KeptReader(reader_class):  # type: ignore[misc,valid-type]
        """A GGUFReader made once per file as it stands (its path, size and modification time)."""

        hearth_read_once = True

        def __new__(cls, path: str | os.PathLike[str], mode: Literal["r", "r+", "c"] = "r") -> Any:
            if mode != "r":
                return reader_class(path, mode)
            found = Path(path).stat()
            key = (os.fspath(path), found.st_size, found.st_mtime_ns)
            if key not in _READERS:
                _READERS[key] = reader_class(path, mode)
            return _READERS[key]

    gguf.GGUFReader = KeptReader  # type: ignore[misc]
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=16)(gguf.get_tensor_name_map)
