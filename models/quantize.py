"""Quantize a GGUF on this machine with llama.cpp's own quantizer (``llama_model_quantize``).

The quantizer runs in a child process: llama.cpp offers no progress callback and no way to stop it, so progress
is read from the growing output file and Cancel ends the child. The output is written under a temporary name and
renamed when complete, so a cancelled or crashed run never leaves a half-written model that looks finished.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from models.gguf import ModelInfo
from models.shared.cancel import CancelToken
from models.shared.errors import HearthError

# The types offered, with llama.cpp's file-type constant names and approximate bits per weight (for progress).
TYPES: dict[str, tuple[str, float]] = {
    "Q8_0": ("LLAMA_FTYPE_MOSTLY_Q8_0", 8.5),
    "Q6_K": ("LLAMA_FTYPE_MOSTLY_Q6_K", 6.56),
    "Q5_K_M": ("LLAMA_FTYPE_MOSTLY_Q5_K_M", 5.7),
    "Q5_0": ("LLAMA_FTYPE_MOSTLY_Q5_0", 5.5),
    "Q4_K_M": ("LLAMA_FTYPE_MOSTLY_Q4_K_M", 4.85),
    "Q4_K_S": ("LLAMA_FTYPE_MOSTLY_Q4_K_S", 4.6),
    "Q4_1": ("LLAMA_FTYPE_MOSTLY_Q4_1", 5.0),
    "Q4_0": ("LLAMA_FTYPE_MOSTLY_Q4_0", 4.5),
    "Q3_K_M": ("LLAMA_FTYPE_MOSTLY_Q3_K_M", 3.9),
    "Q2_K": ("LLAMA_FTYPE_MOSTLY_Q2_K", 3.35),
    "F16": ("LLAMA_FTYPE_MOSTLY_F16", 16.0),
}
# Needs no importance matrix and keeps quality close to Q8_0 for its size: the usual default.
DEFAULT_TYPE = "Q4_K_M"
FULL_PRECISION = frozenset({"F32", "F16", "BF16"})
POLL_S = 0.25


class QuantizeError(HearthError):
    """Quantization was refused or failed."""


class AlreadyQuantized(QuantizeError):
    """The source is already quantized and re-quantizing was not allowed. The remedy speaks of the command line's
    flag; the page says which of its controls does the same (``page_remedy``)."""

    page_remedy = (
        'Tick "Allow re-quantizing an already quantized model" and press Quantize again, or pick a full-precision '
        "(F16 or F32) model."
    )


@dataclass(frozen=True)
class QuantizeProgress:
    fraction: float
    message: str


@dataclass(frozen=True)
class QuantizeWarning:
    """What works but costs quality (re-quantizing, a type below 4 bits), said before the work starts."""

    message: str


def check_request(model: ModelInfo, qtype: str, allow_requantize: bool) -> list[str]:
    """Refuse what cannot work; return warnings for what works but costs quality. Pure."""
    if qtype not in TYPES:
        raise QuantizeError(f"{qtype!r} is not a type Hearth can make.", f"Use one of: {', '.join(TYPES)}.")
    warnings = []
    if model.quantization not in FULL_PRECISION:
        if not allow_requantize:
            raise AlreadyQuantized(
                f"{model.display_name} is already quantized ({model.quantization}); quantizing it again stacks "
                "the rounding errors of both formats.",
                "Quantize from an F16 or F32 file (hearth models convert MODEL --type F16 makes one), or pass "
                "--allow-requantize to do it anyway.",
            )
        warnings.append(
            f"Re-quantizing {model.quantization} to {qtype}: quality will be lower than quantizing the original "
            "full-precision weights."
        )
    expected = expected_size_bytes(model, qtype)
    if expected is not None and expected >= model.file_size_bytes:
        warnings.append(size_note(model, qtype))
    return warnings


def expected_size_bytes(model: ModelInfo, qtype: str) -> int | None:
    """About how big the copy will be: parameters times the type's bits per weight (None when the parameter count
    is unknown). Pure."""
    if qtype not in TYPES or model.parameter_count <= 0:
        return None
    return int(model.parameter_count * TYPES[qtype][1] / 8)


def size_note(model: ModelInfo, qtype: str) -> str:
    """One sentence on what size to expect, said plainly when the copy will not be smaller. Pure."""
    from models.shared.wording import format_bytes

    expected = expected_size_bytes(model, qtype)
    now = format_bytes(model.file_size_bytes)
    if expected is None:
        return f"{model.display_name} is {now}; the size of a {qtype} copy cannot be estimated."
    about = format_bytes(expected)
    if expected >= model.file_size_bytes:
        return (
            f"A {qtype} copy will be about {about}, larger than the {model.quantization} file ({now}): {qtype} keeps "
            f"more bits per weight, so it is not smaller or faster, and it cannot restore what {model.quantization} "
            "already lost."
        )
    return f"A {qtype} copy will be about {about} (the {model.quantization} file is {now})."


def output_name(model: ModelInfo, qtype: str) -> str:
    stem = model.path.name.removesuffix(".gguf")
    for label in (model.quantization, model.quantization.lower()):
        stem = stem.removesuffix(f".{label}").removesuffix(f"-{label}").removesuffix(f"_{label}")
    return f"{stem}.{qtype}.gguf"


def quantize(
    model: ModelInfo, target: Path, qtype: str, threads: int, cancel: CancelToken, allow_requantize: bool = False
) -> Iterator[QuantizeProgress]:
    """Write ``target`` as ``qtype``, yielding progress; raises :class:`QuantizeError` on failure or cancel."""
    check_request(model, qtype, allow_requantize)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    expected = max(int(model.parameter_count * TYPES[qtype][1] / 8), 1)
    context = multiprocessing.get_context("spawn")  # a fresh process: no threads or llama.cpp state inherited
    child = context.Process(
        target=_run_quantizer,
        args=(str(model.path), str(partial), TYPES[qtype][0], threads, allow_requantize),
        name="hearth-quantize",
        daemon=True,
    )
    child.start()
    started = time.monotonic()
    try:
        while child.is_alive():
            if cancel.cancelled:
                child.terminate()
                child.join(10)
                raise QuantizeError("Quantization was cancelled; nothing was saved.", "Start it again when you like.")
            written = partial.stat().st_size if partial.exists() else 0
            fraction = min(written / expected, 0.99)
            elapsed = time.monotonic() - started
            eta = f", about {elapsed * (1 - fraction) / fraction:.0f} s left" if fraction > 0.05 else ""
            yield QuantizeProgress(fraction, f"Writing {target.name}: {fraction:.0%}{eta}")
            child.join(POLL_S)
        if child.exitcode != 0:
            raise QuantizeError(
                f"llama.cpp could not quantize {model.path.name} to {qtype} (exit code {child.exitcode}).",
                "Check free disk space; the details are in Hearth's log.",
            )
        partial.replace(target)
    finally:
        if child.is_alive():
            child.kill()
        partial.unlink(missing_ok=True)
    yield QuantizeProgress(1.0, f"Wrote {target.name}")


def _run_quantizer(source: str, target: str, ftype_name: str, threads: int, allow_requantize: bool) -> None:
    """In the child: quietly run llama.cpp's quantizer and exit with its status."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # llama.cpp prints a line per tensor; the parent reports progress instead
    os.dup2(devnull, 2)
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, ftype_name)
    params.nthread = threads
    params.allow_requantize = allow_requantize
    status = llama_cpp.llama_model_quantize(source.encode(), target.encode(), params)
    os._exit(0 if status == 0 else 1)
