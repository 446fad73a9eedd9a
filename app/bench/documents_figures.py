"""The documents benchmark's figures: one question's sample, the medians and spreads over the questions, each
question's ratio against raw llama-cpp-python, and the lines that report them (pure; ``app.bench.documents`` runs
the questions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.bench.stats import Spread, format_spread, noise_warning, paired_ratios, spread


@dataclass(frozen=True)
class DocumentsSample:
    """One question's figures; times in milliseconds."""

    question: str
    embed_ms: float
    search_ms: float
    prompt_tokens: int
    cached_tokens: int
    prefill_ms: float  # the engine's own time from the prompt to the first token
    time_to_first_token_ms: float  # from sending the question to the first text, as a user waits for it
    decode_tokens_per_s: float
    total_ms: float  # from sending to the answer kept (its citations checked)
    raw_time_to_first_token_ms: float
    raw_decode_tokens_per_s: float
    joined_tokens: int = 0  # passage tokens joined from kept caches instead of read (``--keep-passages``)
    read_before: bool = False  # every passage it was given had been given to an earlier question in this engine


FIELDS = (
    ("embed_ms", "embed the question, ms"),
    ("search_ms", "search, ms"),
    ("prompt_tokens", "prompt tokens"),
    ("cached_tokens", "of them from the cache"),
    ("joined_tokens", "of them joined from kept passages"),
    ("prefill_ms", "prefill, ms"),
    ("time_to_first_token_ms", "time to first token, ms"),
    ("decode_tokens_per_s", "decode tokens/s"),
    ("total_ms", "total, ms"),
    ("raw_time_to_first_token_ms", "raw: time to first token, ms"),
    ("raw_decode_tokens_per_s", "raw: decode tokens/s"),
)
RATIOS = (
    ("time_to_first_token_ms", "raw_time_to_first_token_ms", "time to first token"),
    ("decode_tokens_per_s", "raw_decode_tokens_per_s", "decode tokens/s"),
)


def summarise(samples: Sequence[DocumentsSample]) -> dict[str, Any]:
    """Each figure's spread over the questions, and each question's Hearth/raw ratios' spread; the time to first
    token again over the questions whose passages had all been read before (what keeping them is for), where any
    were."""
    if not samples:
        raise ValueError("no questions were answered")
    figures = {field: spread([float(getattr(s, field)) for s in samples]).as_dict() for field, _ in FIELDS}
    ratios = {}
    for hearth, raw, _ in RATIOS:
        paired = paired_ratios([getattr(s, hearth) for s in samples], [getattr(s, raw) for s in samples])
        if paired:
            ratios[hearth] = spread(paired).as_dict()
    summary: dict[str, Any] = {"questions": len(samples), "figures": figures, "ratios": ratios}
    before = [s for s in samples if s.read_before]
    if before:
        times = [s.time_to_first_token_ms for s in before]
        paired = paired_ratios(times, [s.raw_time_to_first_token_ms for s in before])
        summary["read_before"] = {
            "questions": len(before),
            "time_to_first_token_ms": spread(times).as_dict(),
        } | ({"against_raw": spread(paired).as_dict()} if paired else {})
    return summary


def report_lines(summary: dict[str, Any], model: str, backend: str) -> list[str]:
    lines = [f"{model} on {backend}: {summary['questions']} questions from documents", "medians over the questions:"]
    warnings = []
    for field, label in FIELDS:
        value = Spread(**summary["figures"][field])
        lines.append(f"  {label:<32}{value.median:>9.1f}   (min–max {value.low:.1f}–{value.high:.1f})")
    lines.append("Hearth/raw per question, same prompt:")
    for field, _, label in RATIOS:
        if field not in summary["ratios"]:
            lines.append(f"  {label:<32}not measured")
            continue
        value = Spread(**summary["ratios"][field])
        lines.append(f"  {label:<32}{format_spread(value)}")
        warning = noise_warning(value, f"the {label} ratio")
        if warning:
            warnings.append(warning)
    before = summary.get("read_before")
    if before:
        ttft = Spread(**before["time_to_first_token_ms"])
        lines.append(
            f"questions whose passages had all been read before: {before['questions']} of {summary['questions']}, "
            f"first token {ttft.median / 1000:.2f} s (min–max {ttft.low / 1000:.2f}–{ttft.high / 1000:.2f})"
        )
        if "against_raw" in before:
            lines.append(f"  {'their Hearth/raw':<32}{format_spread(Spread(**before['against_raw']))}")
    return lines + warnings


def follow_up_figures(samples: Sequence[DocumentsSample]) -> dict[str, Any]:
    """For questions asked one after another in one conversation: each follow-up's time to first token against
    the first question's, and the share of its prompt that came from the cache."""
    first = samples[0].time_to_first_token_ms
    later = samples[1:]
    return {
        "first_time_to_first_token_ms": first,
        "time_to_first_token_vs_first": spread([s.time_to_first_token_ms / first for s in later]).as_dict(),
        "cached_share": spread([s.cached_tokens / s.prompt_tokens for s in later if s.prompt_tokens]).as_dict(),
    }


def follow_up_lines(figures: dict[str, Any]) -> list[str]:
    sooner = format_spread(Spread(**figures["time_to_first_token_vs_first"]))
    cached = format_spread(Spread(**figures["cached_share"]))
    return [
        "follow-ups in the same conversation:",
        f"  {'first token vs the first question':<36}{sooner}",
        f"  {'share of the prompt from the cache':<36}{cached}",
    ]


def sample_line(number: int, total: int, sample: DocumentsSample) -> str:
    return (
        f"[{number}/{total}] first token {sample.time_to_first_token_ms / 1000:5.2f} s (raw "
        f"{sample.raw_time_to_first_token_ms / 1000:5.2f} s) · {sample.prompt_tokens} prompt tokens, "
        f"{sample.cached_tokens} cached, {sample.joined_tokens} joined · prefill {sample.prefill_ms / 1000:5.2f} s "
        "· decode "
        f"{sample.decode_tokens_per_s:4.1f} tok/s (raw {sample.raw_decode_tokens_per_s:4.1f})"
    )
