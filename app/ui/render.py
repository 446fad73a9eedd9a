"""Pure functions that turn service data into what Gradio shows. No Gradio import here."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.services.chat import TurnEvent, TurnSaved, TurnStarted
from app.services.conversations import AnswerStats, Conversation, ConversationSummary
from app.services.runtime import RuntimeStatus
from app.wording import shorten
from backends.base import Finished, TextDelta
from rag.prompt import Source

# A markdown image whose target is not local would make the browser fetch it; show it as text instead.
_REMOTE_IMAGE = re.compile(r"!\[([^\]]*)\]\(\s*<?((?:https?:)?//[^)\s>]*)>?[^)]*\)", re.IGNORECASE)
# Fenced code blocks and inline code spans, where markdown shows "<" as typed and nothing renders as HTML.
_CODE = re.compile(r"(```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]+`)", re.DOTALL)
_HEADING_MARKS = re.compile(r"^#{1,6}\s+", re.MULTILINE)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|>~])")
PASSAGE_CHARS = 600


def neutralize_remote_media(text: str) -> str:
    """Text from the model or from documents, made safe to render: remote markdown images become plain text,
    and raw HTML is shown as text instead of rendered (outside code, where it is shown as typed anyway)."""
    text = _REMOTE_IMAGE.sub(lambda m: f"[image: {m.group(1) or 'untitled'}] ({m.group(2)})", text)
    parts = _CODE.split(text)
    return "".join(part if i % 2 else part.replace("<", "&lt;") for i, part in enumerate(parts))


def escape_markdown(text: str) -> str:
    """Show ``text`` exactly as written: no markdown, no HTML, one line."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(" ".join(text.split()), quote=False))


def sources_markdown(sources: Sequence[Source]) -> str:
    """The passages an answer was given, numbered as it cites them: file, page or section, and the text."""
    if not sources:
        return ""
    items = [
        f"<details><summary>[{s.number}] {html.escape(s.label)}</summary>\n\n"
        f"{escape_markdown(shorten(_HEADING_MARKS.sub('', s.text), PASSAGE_CHARS))}\n\n</details>"
        for s in sources
    ]
    return "**Sources**\n\n" + "\n\n".join(items)


def format_stats(stats: AnswerStats) -> str:
    parts = [
        f"{stats.time_to_first_token_ms / 1000:.2f} s to first token",
        f"{stats.decode_tokens_per_s:.1f} tokens/s",
        f"{stats.completion_tokens} tokens",
    ]
    if stats.finish_reason == "cancelled":
        parts.append("stopped")
    elif stats.finish_reason == "length":
        parts.append("cut at the token limit")
    elif stats.finish_reason == "error":
        parts.append("interrupted by an error")
    if stats.retrieve_ms:
        parts.insert(0, f"{stats.retrieve_ms:.0f} ms to find sources")
    if stats.dropped_messages:
        parts.append(f"{stats.dropped_messages} earlier messages left out to fit the context")
    return " · ".join(parts)


def assistant_text(content: str, stats: AnswerStats | None, sources: Sequence[Source] = ()) -> str:
    parts = [neutralize_remote_media(content) if content else "…"]
    if stats is not None:
        parts.append(f"*{format_stats(stats)}*")
    if sources:
        parts.append(sources_markdown(sources))
    return "\n\n".join(parts)


def chat_history(conversation: Conversation | None) -> list[dict[str, str]]:
    if conversation is None:
        return []
    return [
        {"role": "user", "content": neutralize_remote_media(m.content)}
        if m.role == "user"
        else {"role": "assistant", "content": assistant_text(m.content, m.stats, m.sources)}
        for m in conversation.messages
    ]


def conversation_choices(summaries: Sequence[ConversationSummary]) -> list[tuple[str, str]]:
    return [(s.title or "Untitled", s.id) for s in summaries]


def status_markdown(status: RuntimeStatus) -> str:
    if status.state == "error":
        return f"**Model not loaded** — {status.message}"
    if status.state in ("loading", "restarting"):
        return f"**{status.model_name}** — {status.message}"
    if status.state == "idle" or status.plan is None:
        return f"**No model** — {status.message}"
    plan = status.plan
    line = (
        f"**{status.model_name}** · {plan.label} · {plan.threads} threads · "
        f"context {plan.context_length} tokens · offline"
    )
    if status.slots > 1:
        line += f" · {status.slots} answers at once"
    for note in status.notes:
        line += f"  \nNote: {note}"
    return line


@dataclass
class AnswerView:
    """Accumulates a turn's events into the cumulative text Gradio re-renders."""

    history: list[dict[str, str]]
    text: str = ""
    conversation_id: str | None = None
    dropped: int = 0
    finished: str | None = None
    saved_stats: AnswerStats | None = None
    sources: tuple[Source, ...] = ()
    notices: list[str] = field(default_factory=list)
    interrupted: str | None = None  # why the answer ended early, shown under it

    def interrupt(self, reason: str) -> None:
        self.interrupted = reason

    def apply(self, event: TurnEvent) -> list[dict[str, str]]:
        if isinstance(event, TurnStarted):
            self.conversation_id = event.conversation_id
            self.dropped = event.dropped_messages
            self.sources = event.sources
            if event.dropped_messages:
                self.notices.append(
                    f"{event.dropped_messages} earlier messages were left out so the conversation fits the "
                    "model's context window."
                )
        elif isinstance(event, TextDelta):
            self.text += event.text
        elif isinstance(event, Finished):
            self.finished = event.reason
        elif isinstance(event, TurnSaved):
            self.saved_stats = event.message.stats
        return self.render()

    def render(self) -> list[dict[str, str]]:
        if self.finished and not self.text:
            content = "*Stopped before the answer began.*" if self.finished == "cancelled" else "*No answer.*"
        else:
            content = assistant_text(self.text, self.saved_stats, self.sources)
        if self.interrupted:
            content += f"\n\n*⚠ {escape_markdown(self.interrupted)}*"
        return [*self.history, {"role": "assistant", "content": content}]
