"""transformers reading a GGUF for training without doing the same work twice.

``AutoModelForCausalLM.from_pretrained(folder, gguf_file=…)`` opens the file with ``gguf.GGUFReader`` twice, once
for the configuration and once for the weights, and each opening parses every metadata field element by element,
the vocabulary's tens of thousands of strings included. Then, to match tensor names, it builds gguf's
``TensorNameMap`` for the architecture once per module of the model, each build expanding every naming rule for
every block. Both are pure work with the same result each time: inside :func:`reading_once` the process keeps one
reader per file (as long as the file is unchanged) and one name map per architecture and block count; on leaving,
gguf's own reader and function are put back and the readers are let go (a kept reader maps the whole file, which
must not stay resident while the model trains). transformers' loading itself is unchanged, and so are the weights
it makes (``bench/tuning_load.py`` compares them).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal


@contextmanager
def reading_once() -> Iterator[None]:
    """gguf's reader and tensor name map, each made once for the reading done inside."""
    import gguf

    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, int, int], Any] = {}

    class KeptReader(reader_class):  # type: ignore[misc,valid-type]
        """A GGUFReader made once per file as it stands (its path, size and modification time)."""

        def __new__(cls, path: str | os.PathLike[str], mode: Literal["r", "r+", "c"] = "r") -> Any:
            if mode != "r":
                return reader_class(path, mode)
            found = Path(path).stat()
            key = (os.fspath(path), found.st_size, found.st_mtime_ns)
            if key not in readers:
                readers[key] = reader_class(path, mode)
            return readers[key]

    gguf.GGUFReader = KeptReader  # type: ignore[misc]
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=16)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader = reader_class  # type: ignore[misc]
        gguf.get_tensor_name_map = name_map
        readers.clear()
