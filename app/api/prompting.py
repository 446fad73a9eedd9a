"""From a request to what the engine takes: messages and generation parameters. Pure; token counts come in as
numbers or counting functions.

Choices (documented in docs/api.md):
- A plain chat request is the client's whole conversation: nothing is added (no default system prompt) and
  nothing is dropped. If it does not fit the context window the reply is 413, so the client decides what to cut.
- An answer from a collection follows the page's rules instead: the document rules join the client's system
  prompt, the passages are packed first and the oldest turns are left out to fit (``hearth.dropped_messages``).
- ``max_tokens`` 0 is refused by the schema; a value larger than what the context has left after the prompt is
  clamped to it (``finish_reason: "length"`` then says the answer was cut). Without it, Hearth's configured
  answer length applies (``HEARTH_GENERATION__MAX_NEW_TOKENS``).
- System (and ``developer``) messages are joined into one leading system message: many chat templates refuse a
  system message anywhere else.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from app.api.schemas import ChatRequest, CompletionRequest, Message, NamedTool
from backends.base import ChatMessage, GenerationParams, Grammar, ToolCall, ToolSpec
from backends.grammar import json_object_grammar, json_schema_grammar
from backends.tool_calls import calls_grammar
from models.shared.errors import ContextTooLong, EmptyMessage

# Some engines reject an exact 0 (nucleus of nothing); this close to 0 means "only the likeliest token" anyway.
MIN_TOP_P = 0.001
SEED_MODULUS = 2**32  # llama.cpp seeds are 32-bit


def chat_messages(messages: Sequence[Message]) -> list[ChatMessage]:
    system = "\n\n".join(m.text for m in messages if m.role in ("system", "developer") and m.text.strip())
    turns = [_turn(m) for m in messages if m.role in _TURNS]
    if not any(m.role == "user" and m.content.strip() for m in turns):
        raise EmptyMessage(
            "There is no user message with text to answer.",
            "Add a message with role 'user' and some text.",
        )
    return [ChatMessage("system", system), *turns] if system else turns


_TURNS = ("user", "assistant", "tool")


def _turn(message: Message) -> ChatMessage:
    if message.role == "tool":
        return ChatMessage("tool", message.text, tool_call_id=message.tool_call_id)
    if message.role == "assistant":
        calls = tuple(ToolCall(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ())
        return ChatMessage("assistant", message.text, calls)
    return ChatMessage("user", message.text)


def offered_tools(request: ChatRequest) -> tuple[tuple[ToolSpec, ...], Grammar | None]:
    """The functions the model is offered and the grammar that holds its calls to them; none with tool_choice
    ``none`` (the model then answers in text, as at OpenAI)."""
    if not request.tools or request.tool_choice == "none":
        return (), None
    tools = tuple(
        ToolSpec(t.function.name, t.function.description, json.dumps(t.function.parameters)) for t in request.tools
    )
    choice = request.tool_choice
    forced = choice.function.name if isinstance(choice, NamedTool) else None
    return tools, calls_grammar(tools, forced, choice == "required", request.parallel_tool_calls)


def completion_prompt(request: CompletionRequest) -> str:
    if not request.text.strip():
        raise EmptyMessage("The prompt is empty.", "Send some text in 'prompt' for the model to continue.")
    return request.text


def split_question(messages: Sequence[ChatMessage]) -> tuple[str, list[ChatMessage], list[ChatMessage], str]:
    """For an answer from documents: (system prompt, turns before the last user message, turns after it, the
    question itself)."""
    system = messages[0].content if messages and messages[0].role == "system" else ""
    turns = list(messages[1:] if system else messages)
    last = max(i for i, m in enumerate(turns) if m.role == "user")
    return system, turns[:last], turns[last + 1 :], turns[last].content


def requested_params(defaults: GenerationParams, request: ChatRequest | CompletionRequest) -> GenerationParams:
    """The configured defaults with what the request sets; ``max_new_tokens`` is clamped later, by
    :func:`fit_answer`, once the prompt's size is known."""
    top_p = defaults.top_p if request.top_p is None else max(request.top_p, MIN_TOP_P)
    params = dataclasses.replace(
        defaults,
        temperature=defaults.temperature if request.temperature is None else request.temperature,
        top_p=top_p,
        max_new_tokens=request.answer_tokens or defaults.max_new_tokens,
        seed=defaults.seed if request.seed is None else request.seed % SEED_MODULUS,
        stop=request.stop_strings,
        grammar=output_grammar(request) if isinstance(request, ChatRequest) else None,
    )
    if isinstance(request, ChatRequest) and request.tools:
        tools, grammar = offered_tools(request)
        params = dataclasses.replace(params, tools=tools, grammar=grammar)
    return params


def output_grammar(request: ChatRequest) -> Grammar | None:
    """The grammar ``response_format`` asks the answer to follow: any JSON object, or the JSON its schema describes;
    None for plain text."""
    wanted = request.response_format
    if wanted is None or wanted.type == "text":
        return None
    if wanted.type == "json_object":
        return json_object_grammar()
    assert wanted.json_schema is not None  # the schema requires it
    return json_schema_grammar(wanted.json_schema.body)


def fit_answer(params: GenerationParams, prompt_tokens: int, context_length: int) -> GenerationParams:
    """Refuse a prompt that leaves no room to answer; clamp the answer to the room that is left."""
    room = context_length - prompt_tokens
    if room < 1:
        raise ContextTooLong(
            f"The prompt is {prompt_tokens} tokens, and the model's context window holds {context_length}.",
            "Send fewer or shorter messages, or start Hearth with a larger --context.",
        )
    return dataclasses.replace(params, max_new_tokens=min(params.max_new_tokens, room))
