"""The quality/speed ladder: for each quantization type of one model, measured in one run on this machine — file
size, load time, resident memory, prefill and decode tokens/s, and perplexity over a held-out text.

Perplexity follows llama.cpp's own perplexity tool: the text is cut into windows of ``context`` tokens, each
window starts with BOS, and only the second half of each window is scored (every scored token has at least half
a window of context), from llama.cpp's logits. Each type is measured in a fresh child process, so one model's
memory never counts against the next.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models.shared.errors import HearthError

DECODE_TOKENS = 64
PREFILL_TOKENS = 128
PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


class LadderError(HearthError):
    """A rung could not be measured."""


# The ladder's quantized copies live in their own folder, apart from the models the user made or imported.
LADDER_FOLDER = "ladder"
DEFAULT_RUNS = 3
# Runs of one file that differ by more than this share of their median were disturbed (another program).
NOISY_SPREAD = 0.2


@dataclass(frozen=True)
class Rung:
    qtype: str
    file_bytes: int
    load_s: float
    resident_bytes: int
    prefill_tokens_per_s: float  # the median of the runs
    decode_tokens_per_s: float  # the median of the runs
    perplexity: float
    scored_tokens: int
    prefill_runs: tuple[float, ...] = ()
    decode_runs: tuple[float, ...] = ()


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    runs: int

    @property
    def noisy(self) -> bool:
        return self.runs > 1 and self.median > 0 and (self.high - self.low) / self.median > NOISY_SPREAD

    def text(self, digits: int) -> str:
        """``12.3 (11.0–13.1)``: the median and the range, or the one value of a single run."""
        if self.runs <= 1:
            return f"{self.median:.{digits}f}"
        return f"{self.median:.{digits}f} ({self.low:.{digits}f}–{self.high:.{digits}f})"


def spread_of(values: Sequence[float]) -> Spread:
    """Median and range of repeated measurements. Pure."""
    if not values:
        return Spread(float("nan"), float("nan"), float("nan"), 0)
    return Spread(statistics.median(values), min(values), max(values), len(values))


def noise_warning(rungs: Sequence[Rung]) -> str | None:
    """A sentence when some type's speed varied too much between runs to be compared. Pure."""
    noisy = [r.qtype for r in rungs if spread_of(r.decode_runs).noisy or spread_of(r.prefill_runs).noisy]
    if not noisy:
        return None
    return (
        f"The speed of {', '.join(noisy)} varied by more than {NOISY_SPREAD:.0%} between runs: something else was "
        "using the processor, so compare those figures with care (measure again with other programs closed)."
    )


def copy_label(model_name: str, qtype: str) -> str:
    """How a quantized copy is named for people: the model and its type, e.g. ``SmolLM2-135M-Instruct Q8_0``."""
    return f"{model_name} {qtype}"


def window_nll(logits: np.ndarray, tokens: list[int]) -> tuple[float, int]:
    """Negative log-likelihood summed over the second half of one window, and the count. ``logits[i]`` predicts
    ``tokens[i + 1]``. Pure."""
    first = len(tokens) // 2
    rows = logits[first : len(tokens) - 1].astype(np.float64)
    targets = np.asarray(tokens[first + 1 :])
    peak = rows.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(rows - peak).sum(axis=1)) + peak[:, 0]
    picked = rows[np.arange(len(targets)), targets]
    return float((log_norm - picked).sum()), len(targets)


def scored_windows(scorer: Any, bos: int, tokens: list[int], context: int, windows: int) -> tuple[float, int]:
    """The summed negative log-likelihood and the tokens scored over up to ``windows`` windows of ``context``
    tokens (each starting with ``bos``), read by ``scorer``, a llama-cpp-python model with logits for every
    position."""
    nll, count = 0.0, 0
    for index in range(min(windows, len(tokens) // context)):
        window = [bos, *tokens[index * context + 1 : (index + 1) * context]]
        scorer.reset()
        scorer.eval(window)
        part, n = window_nll(np.asarray(scorer.scores[: len(window)]), window)
        nll, count = nll + part, count + n
    return nll, count


def perplexity_from(nll: float, count: int) -> float:
    return math.exp(nll / count) if count else float("nan")


def measure(
    path: Path,
    qtype: str,
    text: str,
    threads: int,
    context: int = 512,
    windows: int = 4,
    runs: int = DEFAULT_RUNS,
) -> Rung:
    """Measure one file in a fresh child process: loaded once, prefill and decode ``runs`` times, perplexity
    once (it is the same every time)."""
    spawn = multiprocessing.get_context("spawn")
    receiver, sender = spawn.Pipe(duplex=False)
    child = spawn.Process(
        target=_measure_in_child, args=(sender, str(path), text, threads, context, windows, max(runs, 1)), daemon=True
    )
    child.start()
    sender.close()
    try:
        result: dict[str, Any] = receiver.recv()
    except EOFError:
        child.join(5)
        raise LadderError(
            f"Measuring {path.name} failed (exit code {child.exitcode}).", "The details are in Hearth's log."
        ) from None
    finally:
        child.join(30)
    if "error" in result:
        raise LadderError(f"Measuring {path.name} failed: {result['error']}.", "The details are in Hearth's log.")
    prefill_runs, decode_runs = tuple(result.pop("prefill_runs")), tuple(result.pop("decode_runs"))
    return Rung(
        qtype=qtype,
        file_bytes=path.stat().st_size,
        prefill_tokens_per_s=statistics.median(prefill_runs),
        decode_tokens_per_s=statistics.median(decode_runs),
        prefill_runs=prefill_runs,
        decode_runs=decode_runs,
        **result,
    )


def _measure_in_child(sender: Any, path: str, text: str, threads: int, context: int, windows: int, runs: int) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        sender.send(_measure(path, text, threads, context, windows, runs))
    except Exception as exc:  # reported to the parent, which raises a typed error
        sender.send({"error": str(exc)})


def _measure(path: str, text: str, threads: int, context: int, windows: int, runs: int) -> dict[str, Any]:
    import psutil

    from backends.llamacpp.buffers import open_llama

    process = psutil.Process()
    before = process.memory_info().rss
    started = time.perf_counter()
    llm = open_llama(
        model_path=path, n_ctx=context, n_batch=context, n_threads=threads, n_threads_batch=threads, verbose=True
    )
    load_s = time.perf_counter() - started
    prompt = llm.tokenize(PROMPT.encode() * 16, add_bos=True)[:PREFILL_TOKENS]
    prefills, decodes = [], []
    resident = 0
    for _run in range(runs):
        llm.reset()
        started = time.perf_counter()
        llm.eval(prompt)
        prefills.append(len(prompt) / (time.perf_counter() - started))
        resident = max(resident, process.memory_info().rss - before)
        produced = 0
        started = time.perf_counter()
        for _token in llm.generate(prompt, temp=0.0):  # reuses the evaluated prompt as its prefix
            produced += 1
            if produced >= DECODE_TOKENS:
                break
        decodes.append(produced / (time.perf_counter() - started))
    bos = llm.token_bos()
    tokens = llm.tokenize(text.encode(), add_bos=False)
    llm.close()

    scorer = open_llama(
        model_path=path,
        n_ctx=context,
        n_batch=context,
        n_threads=threads,
        n_threads_batch=threads,
        logits_all=True,
        verbose=True,
    )
    nll, count = scored_windows(scorer, bos, tokens, context, windows)
    scorer.close()
    return {
        "load_s": load_s,
        "resident_bytes": resident,
        "prefill_runs": prefills,
        "decode_runs": decodes,
        "perplexity": perplexity_from(nll, count),
        "scored_tokens": count,
    }


def chart(rungs: list[Rung], model_name: str, target: Path) -> Path:
    """Quality vs speed vs size as a PNG: perplexity against decode speed, each point sized by file size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    sizes = [r.file_bytes / (1 << 20) for r in rungs]
    scale = 600 / max(sizes)
    axes.scatter(
        [r.decode_tokens_per_s for r in rungs],
        [r.perplexity for r in rungs],
        s=[s * scale for s in sizes],
        alpha=0.5,
        color="#e8743b",
    )
    for rung, size in zip(rungs, sizes, strict=True):
        axes.annotate(
            f"{rung.qtype}\n{size:.0f} MiB",
            (rung.decode_tokens_per_s, rung.perplexity),
            ha="center",
            va="center",
            fontsize=8,
        )
    axes.set_xlabel("decode tokens/s (higher is faster)")
    axes.set_ylabel("perplexity (lower is better)")
    axes.set_title(f"{model_name}: quality vs speed vs size on this machine")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(target)
    plt.close(figure)
    return target
