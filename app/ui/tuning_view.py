"""The Tuning tab's words, tables and chart rows, from what the services return (pure)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.ui.loss_chart import loss_chart_svg
from backends.memory import format_bytes
from models.adapters import (
    MODEL_SCOPE,
    AdapterRecord,
    Attachment,
    collection_scope,
    conversation_scope,
    describe_scope,
)
from models.shared.errors import TuningError
from models.tuning.estimate import TimeEstimate
from models.tuning.options import PRESETS, TuneOptions, preset
from models.tuning.runs import RunError, RunResult, RunStats, RunView

ADAPTER_HEADERS = [
    "Adapter",
    "For model",
    "Trained on",
    "Settings",
    "Loss on examples kept out",
    "Perplexity",
    "Made",
]
# Each column's share of the table's width, so that long settings wrap inside it.
ADAPTER_WIDTHS = ("13%", "15%", "14%", "25%", "11%", "12%", "10%")
# Under the adapters table: what its two figures mean.
FIGURES_HELP = (
    "Both figures are measured before → after training, on examples kept out of training where there are enough "
    "(else on the training examples): lower means the model predicts the answers in your examples better. "
    "Perplexity is the same measure read through llama.cpp, as chat will use the adapter."
)
# The layers an adapter can change, in words (the names in the model's code after them, for those who know them).
TARGET_WORDS = {
    "q_proj": "Attention: queries (q_proj)",
    "k_proj": "Attention: keys (k_proj)",
    "v_proj": "Attention: values (v_proj)",
    "o_proj": "Attention: output (o_proj)",
    "gate_proj": "Feed-forward: gate (gate_proj)",
    "up_proj": "Feed-forward: up (up_proj)",
    "down_proj": "Feed-forward: down (down_proj)",
}


def fit_words(before: float, after: float) -> str:
    """A finished run's check in words: whether the model now predicts the answers better, with the figures."""
    if after < before * 0.99:
        verdict = "The model now predicts the answers in your examples better"
    elif after > before * 1.01:
        verdict = (
            "The model now predicts the answers in your examples worse (try fewer epochs or a lower learning rate)"
        )
    else:
        verdict = "The model predicts the answers in your examples about as well as before"
    return f"{verdict}: perplexity {before:.2f} → {after:.2f}, checked through llama.cpp (lower is better)."


def compare_note(without: str, with_adapter: str, scale: float) -> str:
    """When both answers came out the same: why, and what to try."""
    if not without.strip() or without.strip() != with_adapter.strip():
        return ""
    weaker = f" The scale is {scale:g}: at 1 the adapter counts in full." if scale < 1 else ""
    # Not Standard: on the measured sets it showed the taught style in 2 of 12 answers where Quick showed it in
    # 12 of 12 (docs/tuning.md, bench/data/tuning-presets.*.json).
    return (
        "**Both answers are the same**: the adapter did not change what the model says to this question."
        f"{weaker} Ask a question like the ones in your examples; if the style still does not show, train again "
        "with more examples that show it, or more epochs (Advanced settings)."
    )


STATE_WORDS = {
    "starting": "Starting",
    "running": "Training",
    "finished": "Finished",
    "failed": "Failed",
    "cancelled": "Cancelled",
    "interrupted": "Interrupted",
}


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def data_summary(stats: RunStats) -> str:
    """The checked data in a few lines: counts, tokens, the held-out split, what was cut or dropped."""
    lines = [
        f"**{stats.examples} examples**: {stats.train} to train on, {stats.held_out} held out to measure "
        "the run against."
        if stats.held_out
        else f"**{stats.examples} examples**, all trained on: with fewer than 10 none is held out, so the "
        "run is checked on its training examples.",
        f"{stats.tokens:,} tokens to train on, {stats.trained_tokens:,} of them learned (the answers); the "
        f"longest example is {stats.longest:,} tokens.",
        f"{stats.total_steps} steps.",
    ]
    if stats.cut:
        lines.append(f"{stats.cut} examples are longer than the max length and are cut to it.")
    if stats.dropped:
        lines.append(f"{stats.dropped} examples have nothing left to learn once cut, and are left out.")
    return "\n\n".join(lines)


def memory_summary(total_bytes: int, available_bytes: int, described: str, refusal: str = "", on_gpu: str = "") -> str:
    """The memory plan against what is free; ``on_gpu`` says where on the GPU it would train, when it would."""
    verdict = "fits" if total_bytes <= available_bytes else "**does not fit**"
    if on_gpu:
        text = (
            f"**GPU memory**: it trains {on_gpu}: about {described}. {format_bytes(available_bytes)} of GPU memory "
            f"is free now: it {verdict}."
        )
    else:
        text = f"**Memory**: about {described}. {format_bytes(available_bytes)} is free now: it {verdict}."
    return f"{text}\n\n{refusal}" if refusal else text


def time_summary(load_s: float, step_s: float, tokens_per_s: float, total_steps: int) -> str:
    return (
        f"**Measured time**: about {duration(load_s + step_s * total_steps)} (loading the model {duration(load_s)}, "
        f"then {total_steps} steps of {step_s:.1f} s, {tokens_per_s:,.0f} tokens/s, measured on a few real steps "
        "just now), plus the check at the end."
    )


def estimate_summary(estimate: TimeEstimate | None, on_gpu: bool = False) -> str:
    """The run's time as estimated before anything loads, and where the figure comes from."""
    if on_gpu:
        return "**Time**: it trains on the GPU, which this estimate does not cover: **Time a few real steps** says."
    if estimate is None:
        return "**Time**: this computer's speed could not be measured: **Time a few real steps** says."
    if estimate.source == "earlier run":
        basis = f"at the pace of your last run of this model here, {estimate.tokens_per_s:,.0f} tokens/s"
    else:
        basis = "from this computer's speed; **Time a few real steps** measures it"
    step = f"{estimate.step_s:.1f} s" if estimate.step_s < 10 else duration(estimate.step_s)
    return (
        f"**Time**: about {duration(estimate.total_s)} (loading the model about {duration(estimate.load_s)}, then "
        f"{estimate.steps} steps of about {step}; {basis}), plus the check at the end."
    )


def progress_line(run_id: str, adapter: str, view: RunView, estimated_s: float | None = None) -> str:
    """One line on a run: its state, step, pace and time left, or how it ended. ``estimated_s``: the run's time as
    the check estimated it before the run, set beside what its steps so far measure."""
    state = STATE_WORDS[view.state]
    head = f"**{state}** · adapter **{adapter}** · run {run_id}"
    if view.state == "failed":
        error = view.error or RunError()
        return f"{head}\n\n{error.message} {error.remedy}".rstrip()
    if view.state == "finished":
        result = view.result or RunResult(steps=view.step)
        before, after = result.perplexity_before, result.perplexity_after
        checked = f" {fit_words(before, after)}" if before and after else ""
        return f"{head} · {result.steps} steps.{checked} It is listed under Adapters below."
    parts = [head]
    if view.total_steps:
        parts.append(f"step {view.step} of {view.total_steps}")
    if view.steps:
        parts.append(f"{view.steps[-1].tokens_per_s:,.0f} tokens/s")
    eta = view.eta_s
    if view.state == "running" and eta is not None:
        parts.append(f"about {duration(eta)} left")
    line = " · ".join(parts)
    if view.state == "running" and estimated_s and (step_s := view.step_s) is not None:
        line += "\n\n" + estimate_checked(estimated_s, step_s, view.total_steps)
    if view.state in ("running", "starting") and view.phase:
        line += f"\n\n{view.phase}…"
    if view.state in ("interrupted", "cancelled"):
        if view.resumable:
            line += f"\n\nIt can resume from its checkpoint at step {view.checkpoint_step}: press Resume."
        else:
            line += "\n\nIt stopped before its first checkpoint: start it again."
    return line


def estimate_checked(estimated_s: float, step_s: float, steps: int) -> str:
    """The check's estimate beside the time the measured steps give the training, and why they may differ."""
    measured = step_s * steps
    said = f"The check estimated about {duration(estimated_s)} for the run; its steps so far take about "
    said += f"{step_s:.1f} s each, {duration(measured)} for the training."
    if measured > 1.25 * estimated_s:
        said += " Slower than estimated: other work on this computer shares its cores."
    return said


def chart(view: RunView) -> str:
    """Training loss at each step and held-out loss where it was measured, drawn over the run's steps."""
    training = [(point.step, point.loss) for point in view.steps]
    return loss_chart_svg(training, view.held_out, view.total_steps)


def adapter_rows(records: Sequence[AdapterRecord]) -> list[list[Any]]:
    return [
        [
            r.name,
            r.base_name,
            r.data_label,
            r.settings,
            _before_after(r.held_out_before, r.held_out_after),
            _before_after(r.perplexity_before, r.perplexity_after)
            + (" (training examples)" if r.checked_on_training_data else ""),
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_at)),
        ]
        for r in records
    ]


def _before_after(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "–"
    return f"{before:.2f} → {after:.2f}"


def attached_line(
    name: str | None, scale: float, for_this_model: bool, backend: str = "", hot_swap: bool = True
) -> str:
    """What the Tuning tab says of the attached adapter: whether answers use it now, and why not when they cannot
    (another model is in use, or the backend serving the model cannot answer with an adapter)."""
    if name is None:
        return "No adapter is attached: answers come from the model as it is."
    if not for_this_model:
        return f"**{name}** is attached to another model, so it is not used now."
    if not hot_swap:
        return (
            f"**{name}** is attached, but the model runs on {backend}, which cannot answer with an adapter: answers "
            "would be refused. Choose llama.cpp in the Hardware tab to answer with it, or Detach it."
        )
    return f"Answers use **{name}** at scale {scale:g}."


EVERY_ANSWER = ("Every answer", MODEL_SCOPE)
TARGET_CONVERSATIONS = 30  # the newest conversations offered as places to attach an adapter


def target_choices(collections: Sequence[str], titles: Mapping[str, str]) -> list[tuple[str, str]]:
    """(label, scope) of where an adapter can be attached: every answer, each collection, the newest
    conversations (``titles``: id -> title, newest first)."""
    return [
        EVERY_ANSWER,
        *((f"Collection: {name}", collection_scope(name)) for name in collections),
        *((f"Conversation: {title}", conversation_scope(cid)) for cid, title in titles.items()),
    ]


def scoped_lines(attachments: Sequence[Attachment], titles: Mapping[str, str], model_path: str) -> str:
    """What the Tuning tab says of adapters attached for one collection or one conversation (the one for every
    answer has its own line)."""
    lines = []
    for attachment in attachments:
        if attachment.scope == MODEL_SCOPE:
            continue
        where = describe_scope(attachment.scope, titles)
        unused = "" if Path(attachment.base_path) == Path(model_path) else " (attached to another model: not used now)"
        lines.append(f"Answers from {where} use **{attachment.name}** at scale {attachment.scale:g}{unused}.")
    return "\n\n".join(lines)


def run_choices(runs: Sequence[tuple[str, str, RunView]]) -> list[tuple[str, str]]:
    """(label, run id) for the run picker: adapter name, state and step."""
    return [(f"{adapter} · {STATE_WORDS[view.state].lower()} · {run_id}", run_id) for run_id, adapter, view in runs]


def whole_number(value: object, what: str) -> int | None:
    """A form field's number as an int (None when left empty), or :class:`TuningError` saying what to type."""
    if value is None or value == "":
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number != int(number):
        raise TuningError(f"The {what} must be a whole number, not {value!r}.", f"Type a whole number for the {what}.")
    return int(number)


def options_from_fields(
    preset_name: str,
    rank: object,
    alpha: object,
    targets: Sequence[str],
    learning_rate: object,
    epochs: object,
    steps: object,
    max_length: object,
    batch_size: object,
    gradient_checkpointing: bool,
) -> TuneOptions:
    """The run's settings from the tab's fields (empty ones keep the preset's); out-of-range values raise."""
    if preset_name not in PRESETS:
        raise TuningError(f"There is no preset {preset_name!r}.", "Pick quick or standard.")
    try:
        rate = None if learning_rate in (None, "") else float(learning_rate)  # type: ignore[arg-type]
        passes = None if epochs in (None, "") else float(epochs)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TuningError(
            "The learning rate and epochs must be numbers.", "Type numbers, such as 0.0005 and 3."
        ) from None
    step_count = whole_number(steps, "number of steps")
    return preset(
        preset_name,
        rank=whole_number(rank, "rank"),
        alpha=whole_number(alpha, "alpha"),
        targets=tuple(targets),
        learning_rate=rate,
        epochs=passes,
        max_steps=step_count or None,  # 0 or empty: the epochs decide
        max_length=whole_number(max_length, "max length"),
        batch_size=whole_number(batch_size, "batch size"),
        gradient_checkpointing=bool(gradient_checkpointing),
    )
