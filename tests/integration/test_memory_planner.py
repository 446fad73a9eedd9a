"""The memory planner against what llama.cpp really allocates, for three real GGUFs of three architectures at
2k and 8k context: weights (mapped and repacked), KV cache, output and compute buffers, as llama.cpp reports
them while loading. The estimate must stay within 15%."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.base import LoadOptions
from backends.llamacpp.backend import LlamaCppBackend
from backends.memory import MIB, estimate_llamacpp
from models.gguf import read_model_info
from tests.helpers import GEMMA3_270M, QWEN25_CODER_05B, assembled_model

pytestmark = pytest.mark.integration

BUFFER = re.compile(r"^\S+:\s+\S+\s+(?:model |output |KV |compute )?buffer size =\s+([\d.]+) MiB")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def llama_log() -> Iterator[_Collect]:
    handler = _Collect()
    logger = logging.getLogger("llama.cpp")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(previous)


def allocated_mib(lines: list[str]) -> float:
    sizes = [float(m.group(1)) for line in lines if (m := BUFFER.match(line.strip()))]
    assert sizes, "llama.cpp reported no buffer sizes"
    return sum(sizes)


@pytest.mark.parametrize("context", [2048, 8192])
@pytest.mark.parametrize("which", ["smollm2", "gemma3", "qwen2"])
def test_estimate_is_within_15_percent_of_what_llamacpp_allocates(
    which: str, context: int, embedded_model: Path, llama_cpp_installed: None, llama_log: _Collect
) -> None:
    path = {
        "smollm2": lambda: embedded_model,
        "gemma3": lambda: assembled_model(GEMMA3_270M),
        "qwen2": lambda: assembled_model(QWEN25_CODER_05B),
    }[which]()
    model = read_model_info(path)
    assert model.architecture in ("llama", "gemma3", "qwen2")
    backend = LlamaCppBackend()
    try:
        list(backend.load(model, LoadOptions(context, threads=2)))
    finally:
        backend.close()
    actual = allocated_mib(llama_log.lines)
    estimate = estimate_llamacpp(model, context).total_bytes / MIB
    print(f"{which} at {context}: estimate {estimate:.0f} MiB, llama.cpp allocated {actual:.0f} MiB")
    assert abs(estimate - actual) / actual <= 0.15, f"estimate {estimate:.0f} MiB vs allocated {actual:.0f} MiB"


KV_BUFFER = re.compile(r"^\S+:\s+\S+\s+KV buffer size =\s+([\d.]+) MiB")


@pytest.mark.parametrize("kv_cache_type", ["f16", "q8_0", "q4_0"])
def test_the_context_cache_planned_for_each_type_is_what_llamacpp_allocates(
    kv_cache_type: str, embedded_model: Path, llama_cpp_installed: None, llama_log: _Collect
) -> None:
    from backends.memory import KV_WIDTHS, kv_cache_bytes

    model = read_model_info(embedded_model)
    backend = LlamaCppBackend()
    try:
        list(backend.load(model, LoadOptions(2048, threads=2, slots=2, kv_cache_type=kv_cache_type)))
        assert backend.stream_completion  # loaded and usable
    finally:
        backend.close()
    reported = [float(m.group(1)) for line in llama_log.lines if (m := KV_BUFFER.match(line.strip()))]
    assert reported, "llama.cpp reported no KV buffer"
    planned = kv_cache_bytes(model, 2048, KV_WIDTHS[kv_cache_type]) * 2 / MIB
    assert abs(sum(reported) - planned) / planned <= 0.02, f"planned {planned:.1f} MiB, llama.cpp {sum(reported)} MiB"
    flash = [line for line in llama_log.lines if re.search(r"flash_attn\s+=\s+\w+", line)]
    assert flash and flash[-1].endswith("enabled")  # every cache type: Hearth's contexts use flash attention
