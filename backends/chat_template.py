"""Render a model's chat template safely, or fall back to ChatML and say why.

The template comes from the GGUF file, which is untrusted. It renders in Jinja's immutable sandbox (no reaching
Python internals, the CVE-2024-34359 class of payloads), inside a renderer process with a time and memory budget
(``backends.template_renderer``): a template that loops, computes huge numbers or allocates gigabytes is cut off
at its budget instead of hanging the engine. When a model loads, its template is probed on conversations of 1 to
8 messages, with and without a system message, ending in a question or in an answer, all within one budget.

Any failure (an error, the budget, the memory limit, an empty or absurdly long prompt) refuses the template for
that model: this and every later prompt use ChatML, and ``fallback_reason`` says why (the backends show it as a
note). A failure that appears only at a later turn is handled the same way at that turn. Messages too long for
any context window are not sent to the renderer at all (that turn is written in ChatML, and fails on its length
as it would anyway): what a user sends must not be able to get a good template refused.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

from backends.base import ChatMessage, Role, ToolSpec
from backends.template_renderer import Conversation, RendererClosed, RenderFailed, TemplateRenderer
from backends.tool_calls import generic_messages, template_family
from backends.turn_markers import Defuser

log = logging.getLogger(__name__)

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
MIB = 1 << 20
# Text a template may add around the messages' own, per message: role markers and separators are a few dozen
# characters in real templates.
OVERHEAD_PER_MESSAGE_CHARS = 1_000
PROBE_MESSAGES = 8


@dataclass(frozen=True)
class TemplateLimits:
    """What a template may take. A real template renders in milliseconds; these leave a wide margin for a busy
    machine while keeping a hostile one's cost small."""

    probe_s: float = 3.0  # every probe render together, when the model loads
    turn_s: float = 1.5  # one render for a real turn (and the longest a caller can wait behind one) ...
    turn_s_per_million_chars: float = 2.0  # ... plus this for long messages, which take time to pass along
    memory_bytes: int = 256 * MIB  # the renderer process's whole address space
    # Most text a template may add to the messages' own (a long built-in system prompt), beyond
    # OVERHEAD_PER_MESSAGE_CHARS per message.
    overhead_chars: int = 32_000
    # Messages longer than this (about half a million tokens) fit no context window; they are never rendered.
    max_input_chars: int = 2_000_000

    def turn_budget_s(self, conversation: Conversation) -> float:
        return self.turn_s + self.turn_s_per_million_chars * _content_chars(conversation) / 1_000_000


class ChatFormatter:
    """Prompts from messages with the model's template while it holds up, ChatML once it has been refused.

    Thread-safe. Starting one starts its renderer process (when there is a template to render), so the process
    is ready by the time :meth:`probe` runs; :meth:`close` ends it.
    """

    def __init__(
        self, template: str | None, bos_token: str, eos_token: str, limits: TemplateLimits | None = None
    ) -> None:
        self.bos_token = bos_token
        self.eos_token = eos_token
        self._limits = limits or TemplateLimits()
        self._template = template or CHATML_TEMPLATE
        self._lock = threading.Lock()
        self._renderer: TemplateRenderer | None = None
        self._reason: str | None = None
        self._fold_system = False  # set by the probe: the template raises on a system message
        # The special tokens text must not spell out (the backend sets them once its vocabulary is loaded).
        self.defuser = Defuser()
        if template:
            self._renderer = TemplateRenderer(template, bos_token, eos_token, self._limits.memory_bytes)
        else:
            self._reason = "the model has no chat template"

    @property
    def template(self) -> str:
        """The template in use: the model's own, or ChatML."""
        return CHATML_TEMPLATE if self._reason else self._template

    @property
    def fallback_reason(self) -> str | None:
        """Why ChatML is used instead of the model's template; None while the model's template is used."""
        return self._reason

    def probe(self) -> None:
        """Render the probe conversations within one budget; refuse the template if any of them fails."""
        renderer = self._renderer
        if renderer is None:
            return
        conversations = probe_conversations()
        longest = [allowed_chars(c, self._limits) for c in conversations]
        try:
            try:
                prompts = renderer.render(conversations, longest, self._limits.probe_s)
            except RenderFailed as failure:
                if not _refused_a_system_message(failure, conversations):
                    raise
                # Some templates (Gemma 2's, Mistral's first) raise on a system message: the instructions then go
                # at the head of the first question, as those models were taught to read them.
                conversations = [replace(c, messages=tuple(fold_system(c.messages))) for c in conversations]
                prompts = renderer.render(conversations, longest, self._limits.probe_s)
                self._fold_system = True
        except RenderFailed as failure:
            self._refuse(describe_failure(failure, conversations, self._limits, probing=True))
            return
        except RendererClosed:
            return
        for conversation, prompt in zip(conversations, prompts, strict=True):
            problem = check_prompt(conversation, prompt, self._limits, probing=True)
            if problem is not None:
                self._refuse(problem)
                return

    @property
    def folds_system(self) -> bool:
        """Whether the model's template refuses a system message, which then opens the first question instead."""
        return self._fold_system and not self._reason

    def render(self, messages: Sequence[ChatMessage], add_generation_prompt: bool = True) -> str:
        renderer = self._renderer
        if self.folds_system:
            messages = fold_system(messages)
        conversation = Conversation(tuple(messages), add_generation_prompt)
        if renderer is not None and _content_chars(conversation) <= self._limits.max_input_chars:
            try:
                budget_s = self._limits.turn_budget_s(conversation)
                prompt = renderer.render([conversation], [allowed_chars(conversation, self._limits)], budget_s)[0]
            except RenderFailed as failure:
                self._refuse(describe_failure(failure, [conversation], self._limits, probing=False))
            except RendererClosed:
                pass  # refused by another answer's render meanwhile, or the model is closing
            else:
                problem = check_prompt(conversation, prompt, self._limits, probing=False)
                if problem is None:
                    return prompt
                self._refuse(problem)
        return render_chatml(messages, add_generation_prompt)

    def render_chat(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()) -> str:
        """The prompt for a chat turn on any backend: ``tools`` offered as :meth:`render_tools` offers them; earlier
        calls and their results, with no tools offered now, written into plain turns (a template that knows no
        tool turns would drop or refuse them). No text in the messages or the tools' descriptions becomes a special
        token (``backends.turn_markers``)."""
        messages, tools = self.defuser.messages(messages), self.defuser.tools(tools)
        if tools:
            return self.render_tools(messages, tools)
        if any(m.role == "tool" or m.tool_calls for m in messages):
            return self.render(generic_messages(messages, ()))
        return self.render(messages)

    def render_tools(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> str:
        """A prompt that offers ``tools``: rendered by the model's template where it knows Hearth's form of a call
        (``backends.tool_calls``), else the tools and earlier calls written into the turns for any template. A
        template that fails with tools is not refused for it (it may still render plain turns well): this turn
        takes the written form instead."""
        renderer = self._renderer
        if renderer is not None and template_family(self._template) == "native" and not self._reason:
            turns = fold_system(messages) if self.folds_system else messages
            conversation = Conversation(tuple(turns), True, tuple(tools))
            if _content_chars(conversation) <= self._limits.max_input_chars:
                try:
                    budget_s = self._limits.turn_budget_s(conversation)
                    prompt = renderer.render([conversation], [allowed_chars(conversation, self._limits)], budget_s)[0]
                except (RenderFailed, RendererClosed) as failure:
                    log.info("the chat template did not render tools (%s); writing them into the turns", failure)
                else:
                    if check_prompt(conversation, prompt, self._limits, probing=False) is None:
                        return prompt
        return self.render(generic_messages(messages, tools))

    def close(self) -> None:
        with self._lock:
            renderer, self._renderer = self._renderer, None
        if renderer is not None:
            renderer.close()

    def __enter__(self) -> ChatFormatter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _refuse(self, problem: str) -> None:
        with self._lock:
            if self._reason is None:
                self._reason = f"its chat template was refused: {problem}"
                log.warning("The model's chat template was refused, using ChatML instead: %s", problem)
            renderer, self._renderer = self._renderer, None
        if renderer is not None:
            renderer.close()


def build_formatter(
    template: str | None, bos_token: str, eos_token: str, limits: TemplateLimits | None = None
) -> ChatFormatter:
    """A probed formatter: the model's template if it held up, else ChatML with the reason."""
    formatter = ChatFormatter(template, bos_token, eos_token, limits)
    formatter.probe()
    return formatter


def fold_system(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """``messages`` without a system message: its text opens the first user message (or is one, when none
    follows)."""
    if not messages or messages[0].role != "system":
        return list(messages)
    system, rest = messages[0], list(messages[1:])
    for index, message in enumerate(rest):
        if message.role == "user":
            rest[index] = replace(message, content=f"{system.content}\n\n{message.content}")
            return rest
    return [ChatMessage("user", system.content), *rest]


def _refused_a_system_message(failure: RenderFailed, conversations: Sequence[Conversation]) -> bool:
    """Whether the template raised on a probe conversation that opens with a system message (and so perhaps only
    because of it: the probe is then tried again with the system message folded)."""
    index = failure.index
    if failure.kind != "error" or index is None or index >= len(conversations):
        return False
    messages = conversations[index].messages
    return bool(messages) and messages[0].role == "system"


def render_chatml(messages: Sequence[ChatMessage], add_generation_prompt: bool = True) -> str:
    """What :data:`CHATML_TEMPLATE` renders, without a template engine: Hearth's own format needs no sandbox."""
    turns = "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages)
    return turns + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def probe_conversations() -> list[Conversation]:
    """Every conversation shape Hearth sends, 1 to 8 messages: with and without a system message, ending in a
    question (with the assistant's opening) or in an answer (without). Roles alternate, as templates expect."""
    conversations = []
    for count in range(1, PROBE_MESSAGES + 1):
        for system in (False, True):
            turns = count - system
            if turns < 1:
                continue
            roles: list[Role] = [("user", "assistant")[i % 2] for i in range(turns)]
            messages = [ChatMessage("system", "Probe system prompt.")] if system else []
            messages += [ChatMessage(role, f"Probe {role} message {i + 1}.") for i, role in enumerate(roles)]
            conversations.append(Conversation(tuple(messages), add_generation_prompt=roles[-1] == "user"))
    return conversations


def check_prompt(conversation: Conversation, prompt: str, limits: TemplateLimits, probing: bool) -> str | None:
    """Why ``prompt`` is not a usable rendering of ``conversation`` (None when it is)."""
    where = _where(conversation, probing)
    if not prompt.strip():
        return f"it rendered an empty prompt ({where})"
    if len(prompt) > allowed_chars(conversation, limits):
        return f"it rendered an absurdly long prompt of {len(prompt):,} characters ({where})"
    if probing:
        # Probe messages are short and plain, so a template that keeps the question keeps it verbatim.
        question = next(m.content for m in reversed(conversation.messages) if m.role == "user")
        if question not in prompt:
            return f"its prompt left out the user's message ({where})"
    return None


def allowed_chars(conversation: Conversation, limits: TemplateLimits) -> int:
    """The longest prompt a template may make of ``conversation``: its messages and a bounded wrapping."""
    count = len(conversation.messages)
    return _content_chars(conversation) + limits.overhead_chars + OVERHEAD_PER_MESSAGE_CHARS * count


def describe_failure(
    failure: RenderFailed, conversations: Sequence[Conversation], limits: TemplateLimits, probing: bool
) -> str:
    """The reason a person reads for a failed render."""
    index = failure.index if failure.index is not None else (0 if len(conversations) == 1 else None)
    known = index is not None and index < len(conversations)
    where = f" ({_where(conversations[index], probing)})" if known and index is not None else ""
    match failure.kind:
        case "timeout":
            return f"it did not finish rendering within {failure.detail}{where}"
        case "memory":
            return f"it needed more than {limits.memory_bytes // MIB} MB of memory{where}"
        case "too_long":
            length = int(failure.detail) if failure.detail.isdigit() else 0
            return f"it rendered an absurdly long prompt of {length:,} characters{where}"
        case "crashed":
            return f"the template renderer stopped: {failure.detail}{where}"
        case _:
            return f"{failure.detail}{where}"


def _content_chars(conversation: Conversation) -> int:
    calls = sum(len(c.name) + len(c.arguments) for m in conversation.messages for c in m.tool_calls)
    tools = sum(len(t.name) + len(t.description) + len(t.parameters) for t in conversation.tools)
    return sum(len(m.content) for m in conversation.messages) + calls + tools


def _where(conversation: Conversation, probing: bool) -> str:
    count = len(conversation.messages)
    messages = f"{count} message{'s' if count != 1 else ''}"
    if not probing:
        return f"at a turn of {messages}"
    system = "with" if conversation.messages[0].role == "system" else "without"
    return f"for {messages}, {system} a system message"
