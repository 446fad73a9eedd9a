"""Pure functions that turn service data into what Gradio shows. No Gradio import here."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.reading_pace import ReadingPace
from app.services.answering.attachment_plan import AttachmentUse
from app.services.answering.chat import TurnEvent, TurnSaved, TurnStarted
from app.services.answering.drafts import INTERRUPTED
from app.services.answering.tool_turn import CallLog
from app.services.library.attachment_store import AttachmentSummary
from app.services.library.conversations import AnswerStats, Conversation, ConversationSummary, ToolRecord
from app.services.serving.model_handles import RuntimeStatus
from app.tools.loop import CallAsked, CallDone, LoopNote
from app.ui.safe_markdown import literal, safe_markdown
from app.ui.streamed_markdown import StreamedMarkdown
from backends.base import Finished, Reading, TextDelta
from models.shared.wording import shorten
from rag.attachments import AttachProgress
from rag.prompt import Source

PASSAGE_CHARS = 600
# How much of a call's arguments and result the chat shows (all of it is kept, and given to the model).
CALL_ARGUMENTS_CHARS = 300
CALL_RESULT_CHARS = 1_200


def sources_markdown(sources: Sequence[Source], earlier: int = 0) -> str:
    """The passages an answer was given, numbered as it cites them: file, page or section, and the text.

    ``earlier``: how many passages the conversation's earlier answers numbered. Numbers run on across a conversation
    (so that "[2]" means one passage throughout, for the model as for the reader): a follow-up's first new source may
    be [8]. The list then says so, and marks each passage an earlier answer was given, so that [8] does not read as
    the eighth source of this answer."""
    if not sources:
        return ""
    # The label stays on one line: a blank line would end the HTML block and let the rest be read as Markdown.
    items = [
        f"<details><summary>[{s.number}] {html.escape(' '.join(s.label.split()))}"
        f"{' · given with an earlier answer' if s.number <= earlier else ''}</summary>\n\n"
        f"{literal(shorten(s.text, PASSAGE_CHARS))}\n\n</details>"
        for s in sources
    ]
    heading = "**Sources**"
    if earlier:
        span = "[1]" if earlier == 1 else f"[1] to [{earlier}]"
        heading += f" · *numbered across this conversation: {span} came with earlier answers*"
    return heading + "\n\n" + "\n\n".join(items)


def tool_calls_markdown(records: Sequence[ToolRecord], now: CallAsked | None = None) -> str:
    """The calls an answer made, each collapsed to a line (tool, server, allowed or refused) that opens on its
    arguments and result, then the call being asked about or run now. A tool's words are shown as data, as
    passages are: escaped, never read as Markdown or HTML."""
    items = []
    for record in records:
        state = "refused" if not record.allowed else ("failed" if record.is_error else "done")
        arguments = literal(shorten(record.arguments, CALL_ARGUMENTS_CHARS))
        result = literal(shorten(record.result, CALL_RESULT_CHARS)) or "(nothing)"
        items.append(
            f"<details><summary>Tool call: {html.escape(' '.join(_called(record.tool, record.server).split()))} · "
            f"{state}</summary>"
            f"\n\nArguments: {arguments}\n\nResult: {result}\n\n</details>"
        )
    if now is not None:
        arguments = literal(shorten(now.call.arguments, CALL_ARGUMENTS_CHARS))
        called = literal(_called(now.tool, now.server))
        if now.asking:
            items.append(f"**Tool call waiting for you:** {called} with {arguments}. Allow it or deny it below.")
        else:
            allowed = "allowed" if now.decided else "allowed for good"
            items.append(f"*Running {called} with {arguments} ({allowed})…*")
    return "\n\n".join(items)


def _called(tool: str, server: str) -> str:
    return f"{tool} ({server})" if server else tool


CALL_MARKER = "call:"


def call_question(asked: CallAsked | None) -> str:
    """Beside the buttons that answer it: the call waiting for the user, with its arguments."""
    if asked is None:
        return ""
    arguments = literal(shorten(asked.call.arguments, CALL_ARGUMENTS_CHARS))
    # The call's id rides along unseen: a press answers the call it was shown beside, never a later one.
    marker = f"<!-- {CALL_MARKER}{html.escape(asked.call.id)} -->"
    return f"Run **{literal(asked.tool)}** from **{literal(asked.server)}** with {arguments}?{marker}"


def shown_call_id(question: str | None) -> str | None:
    """The id of the call ``question`` (as :func:`call_question` wrote it) asks about."""
    found = re.search(rf"<!-- {CALL_MARKER}([^ <>]*) -->", question or "")
    return html.unescape(found.group(1)) if found else None


def upload_limit_note(max_file_mb: int) -> str:
    """Under the upload box: the limit the browser enforces, and where it is set (a setting read at start; the
    page cannot change it while Hearth runs)."""
    return (
        f"Files larger than {max_file_mb} MB are refused before they are sent.\n\n"
        "<details><summary>Details</summary>\n\nThe limit is the `HEARTH_RAG__MAX_FILE_MB` setting, read when Hearth "
        "starts.\n\n</details>"
    )


def answering_from(collection: str | None) -> str:
    """Above the chat: where this conversation's answers come from (it remembers the choice)."""
    if not collection:
        return "Answering **without documents**: pick a collection to answer from its files."
    return f"Answering from **{literal(collection)}**, with numbered sources (this chat keeps it)."


def format_stats(stats: AnswerStats) -> str:
    if stats.finish_reason == INTERRUPTED:  # a draft saved while it was written, and the writing never ended
        return "cut off: Hearth stopped while writing this answer"
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
    parts.extend(literal(use.words) for use in stats.attachments)
    if stats.adapter:
        parts.append(f"adapter {literal(stats.adapter)}")
    return " · ".join(parts)


def attached_files_markdown(files: Sequence[AttachmentSummary], uses: Sequence[AttachmentUse] = ()) -> str:
    """Above the message box: each file attached to this conversation, its size, and how the last answer used it
    ("whole file in context" or "searched: 5 passages used")."""
    if not files:
        return ""
    used = {use.name: use for use in uses}
    items = []
    for file in files:
        size = f"{file.pages} page{'s' if file.pages != 1 else ''}" if file.pages else f"{file.chars:,} characters"
        use = used.get(file.name)
        how = f": {literal(use.words.removeprefix(file.name + ': '))}" if use is not None else ""
        items.append(f"**{literal(file.name)}** ({size}){how}")
    return "Files in this chat, for this conversation only: " + " · ".join(items)


def for_chatbot(markdown: str) -> str:
    """A message as the Chatbot is handed it. Gradio runs every message through ``inspect.cleandoc``, which strips
    the indentation shared by all lines after the first: a message that is one list item would lose its indentation,
    and the lines of a code block inside it would be read as Markdown (and HTML). A leading newline makes the first
    line one of "the lines after the first", so nothing is stripped; cleandoc then drops the newline itself."""
    return f"\n{markdown}"


def user_text(text: str) -> str:
    return for_chatbot(safe_markdown(text))


def assistant_text(
    content: str,
    stats: AnswerStats | None,
    sources: Sequence[Source] = (),
    calls: Sequence[ToolRecord] = (),
    earlier: int = 0,
) -> str:
    """``earlier``: the passages the conversation numbered before this answer (:func:`sources_markdown`)."""
    sources_block = sources_markdown(sources, earlier)
    return answer_markdown(safe_markdown(content), stats, sources_block, tool_calls_markdown(calls))


def answer_markdown(body: str, stats: AnswerStats | None, sources_block: str, calls_block: str = "") -> str:
    """An answer already made safe, with the tool calls it made above it and its stats line and sources under
    it."""
    parts = [calls_block] if calls_block else []
    if body or not calls_block:
        parts.append(body or "…")
    if stats is not None:
        parts.append(f"*{format_stats(stats)}*")
    if sources_block:
        parts.append(sources_block)
    return "\n\n".join(parts)


def chat_history(conversation: Conversation | None) -> list[dict[str, str]]:
    if conversation is None:
        return []
    shown: list[dict[str, str]] = []
    numbered = 0  # the highest source number of the answers so far
    for m in conversation.messages:
        if m.role == "user":
            shown.append({"role": "user", "content": user_text(m.content)})
            continue
        text = assistant_text(m.content, m.stats, m.sources, m.tool_calls, numbered)
        shown.append({"role": "assistant", "content": for_chatbot(text)})
        numbered = max([numbered, *(s.number for s in m.sources)])  # a follow-up may reuse only earlier ones
    return shown


def conversation_choices(summaries: Sequence[ConversationSummary]) -> list[tuple[str, str]]:
    return [(s.title or "Untitled", s.id) for s in summaries]


def one_line(text: str) -> str:
    """Text that may carry a model's own words (its name, a template's error) as Markdown on one line: code and
    emphasis kept, images and HTML not."""
    return safe_markdown(" ".join(text.split()))


def status_markdown(status: RuntimeStatus, adapter: str | None = None) -> str:
    """``adapter``: the one every answer uses now, named after where the model runs."""
    if status.state == "error":
        return f"**Model not loaded** — {one_line(status.message)}"
    if status.state in ("loading", "restarting"):
        return f"**{literal(status.model_name)}** — {one_line(status.message)}"
    if status.state == "idle" or status.plan is None:
        return f"**No model** — {one_line(status.message)}"
    plan = status.plan
    # The threads and how many answers run at once are the Hardware tab's (plan_html), not the header's.
    line = f"**{literal(status.model_name)}** · {plan.label} · context {plan.context_length} tokens · offline"
    if adapter:
        line += f" · adapter **{literal(adapter)}** on every answer"
    for note in status.notes:
        line += f"  \nNote: {one_line(note)}"
    if status.pending:
        line += f"  \n{one_line(status.pending)}…"
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
    earlier_sources: int = 0  # the passages the conversation numbered before this answer
    notices: list[str] = field(default_factory=list)
    interrupted: str | None = None  # why the answer ended early, shown under it
    attaching: str | None = None  # how far attaching the message's files has got, until the answer starts
    calls: CallLog = field(default_factory=CallLog)  # the tool calls made so far
    now: CallAsked | None = None  # the call being asked about, or run, now
    loop_notes: list[str] = field(default_factory=list)  # why the model stopped calling tools
    corrections: tuple[str, ...] = ()  # what the kept answer changed from the streamed one ("Citation corrected")
    reading: str = ""  # what the model reads before its first word, said while it does when that takes a while
    read_words: str = "your question"  # what the prompt holds, for the progress the engine reports
    pace: ReadingPace = field(default_factory=ReadingPace)
    # Redrawn many times a second: the answer is read again only where it grew, the sources once.
    _body: StreamedMarkdown = field(default_factory=StreamedMarkdown, repr=False)
    _sources_block: tuple[tuple[Source, ...], str] = ((), "")

    def interrupt(self, reason: str) -> None:
        self.interrupted = reason

    def apply(self, event: TurnEvent) -> list[dict[str, str]]:
        if isinstance(event, AttachProgress):
            self.attaching = event.words
        elif isinstance(event, TurnStarted):
            self.attaching = None
            self.reading = event.reading
            self.read_words = event.read_words
            self.conversation_id = event.conversation_id
            self.dropped = event.dropped_messages
            self.sources = event.sources
            self.earlier_sources = event.earlier_sources
            if event.dropped_messages:
                self.notices.append(
                    f"{event.dropped_messages} earlier messages were left out so the conversation fits the "
                    "model's context window."
                )
        elif isinstance(event, TextDelta):
            self.text += event.text
        elif isinstance(event, Reading):
            self.reading = self.pace.line(self.read_words, event.done, event.total)
        elif isinstance(event, CallAsked | CallDone):
            self.calls.take(event)
            self.now = event if isinstance(event, CallAsked) else None
        elif isinstance(event, LoopNote):
            self.loop_notes.append(event.text)
        elif isinstance(event, Finished):
            self.finished = event.reason
        elif isinstance(event, TurnSaved):
            self.saved_stats = event.message.stats
            self.text = event.message.content  # as kept: citations moved onto the passages that say it
            self.sources = event.message.sources  # with what search_documents found, when the model searched
            self.corrections = event.notes
            self.now = None
        return self.render()

    @property
    def asking(self) -> CallAsked | None:
        """The call waiting for the user's decision, if one is."""
        return self.now if self.now is not None and self.now.asking else None

    def render(self) -> list[dict[str, str]]:
        calls = tool_calls_markdown(self.calls.records, self.now)
        notes = "\n\n".join(f"*{literal(note)}*" for note in self.loop_notes)
        calls = "\n\n".join(part for part in (calls, notes) if part)
        if self.finished and not self.text and not calls:
            content = "*Stopped before the answer began.*" if self.finished == "cancelled" else "*No answer.*"
        elif self.attaching and not self.text:
            content = f"*{literal(self.attaching)}…*"
        elif self.reading and not self.text and not calls and not self.finished:
            content = f"*{self.reading}*"
        else:
            # Once the answer is complete it is read whole, so it shows exactly as it will when reopened.
            body = safe_markdown(self.text) if self.finished else self._body.render(self.text)
            content = answer_markdown(body, self.saved_stats, self._sources(), calls)
        if self.corrections:  # said under the answer that changed while it was on screen
            content += "".join(f"\n\n*{literal(note)}*" for note in self.corrections)
        if self.interrupted:
            content += f"\n\n*⚠ {literal(self.interrupted)}*"
        return [*self.history, {"role": "assistant", "content": for_chatbot(content)}]

    def _sources(self) -> str:
        if self._sources_block[0] is not self.sources:
            self._sources_block = (self.sources, sources_markdown(self.sources, self.earlier_sources))
        return self._sources_block[1]
