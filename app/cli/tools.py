"""``hearth chat --tools``: one answer with the built-in tools and those of the MCP servers that are on, each call
shown on the terminal and asked about before it runs ("always" is remembered per server and tool). With no
terminal to ask on, every call is refused, unless ``--allow-tools`` allows them for this one command."""

from __future__ import annotations

import json
import sys

from app.cli.commands import load_model
from app.services.answering.tool_turn import fitted_stream
from app.services.container import build_services
from app.settings import Settings
from app.terminal_text import for_terminal, for_terminal_lines
from app.tools.consent import ConsentBook
from app.tools.documents_tool import DocumentSearch
from app.tools.loop import CallAsked, CallDone, Decision, LoopNote, answer_with_tools
from app.tools.relevance import fitting_tools
from app.tools.servers import ServerBook
from app.tools.toolbox import tools_box
from backends.base import CancelToken, ChatMessage, TextDelta, Usage
from models.shared.wording import shorten

EXIT_OK = 0
SHOWN_RESULT_CHARS = 300
EXCERPT_CHARS = 240
TOO_LONG = "Ask again with --context larger, or with fewer tools on (hearth mcp disable NAME)."


def run_chat_with_tools(settings: Settings, question: str, allow_all: bool, collection: str | None = None) -> int:
    services = build_services(settings)
    try:
        params = services.generation_params()
        search = None
        if collection is not None:
            documents = services.documents.get()
            name = documents.manifest.get(collection).name  # a clear error before the model loads
            search = DocumentSearch(name, documents.retriever.search, settings.rag.top_k)
        load_model(services)
        servers = ServerBook(services.paths.mcp_servers_file).entries()
        searching = [search.offered()] if search is not None and settings.tools.search_documents else []
        box = tools_box(servers, settings.tools.call_timeout_s, searching, settings.tools.calculator)
        if not box.offered:
            _err("[no tool is on: the model answers without tools]")
        for problem in box.problems:
            _err(f"[tools] {for_terminal(problem)}")  # a server's own words: its escape codes shown, not run
        if box.offered:
            embedder = services.documents.get().embedder
            fit = fitting_tools(embedder, question, box.specs(), settings.tools.fit_threshold)
            left_out = [s.name for s in box.specs() if s not in fit]
            box = box.keeping({s.name for s in fit})
            if left_out:
                _err(f"[tools that do not fit the question, not offered: {', '.join(left_out)}]")
            _err(f"[tools offered: {', '.join(s.name for s in box.specs()) or 'none'}]")
        consent = ConsentBook(services.paths.tool_consent_file)
        messages = [ChatMessage("system", settings.generation.system_prompt), ChatMessage("user", question)]
        cancel = CancelToken()
        with services.runtime.lease() as engine:
            stream = fitted_stream(engine, cancel, TOO_LONG)
            ask = _allow_all if allow_all else _ask_on_terminal
            for event in answer_with_tools(stream, messages, params, box, ask, consent, settings.tools.max_calls):
                _show(event)
        sys.stdout.write("\n")
        if search is not None and search.sources:
            print("\nSources (found by search_documents):")
            for source in search.sources:
                excerpt = for_terminal(shorten(source.text, EXCERPT_CHARS))
                print(f"[{source.number}] {for_terminal(source.label)}\n    {excerpt}")
    finally:
        services.close()
    return EXIT_OK


def _show(event: object) -> None:
    if isinstance(event, TextDelta):
        sys.stdout.write(for_terminal_lines(event.text))
        sys.stdout.flush()
    elif isinstance(event, CallAsked) and not event.decided:
        _err(f"\n[tool call] {_described(event)}")
    elif isinstance(event, CallDone):
        state = "refused" if not event.allowed else ("failed" if event.is_error else "result")
        text = " ".join(event.result.split())
        shown = text if len(text) <= SHOWN_RESULT_CHARS else f"{text[:SHOWN_RESULT_CHARS]}… ({len(text):,} characters)"
        _err(f"[{state}] {for_terminal(shown)}")
    elif isinstance(event, LoopNote):
        _err(f"[{for_terminal(event.text)}]")
    elif isinstance(event, Usage):
        _err(f"[{event.completion_tokens} tokens · {event.decode_tokens_per_s:.1f} tokens/s]")


def _described(asked: CallAsked) -> str:
    try:
        arguments = json.dumps(json.loads(asked.call.arguments), ensure_ascii=False)
    except (ValueError, RecursionError):
        arguments = asked.call.arguments
    return for_terminal(f"{asked.tool} ({asked.server}) with {arguments}")


def _allow_all(_asked: CallAsked) -> Decision:
    return "once"


def _ask_on_terminal(asked: CallAsked) -> Decision:
    if not sys.stdin.isatty():
        _err("[no terminal to ask on: the call is refused; --allow-tools allows calls for one command]")
        return "deny"
    while True:
        sys.stderr.write(
            f"Allow {for_terminal(asked.tool)} ({for_terminal(asked.server)})? [y]es once, [a]lways, [n]o: "
        )
        sys.stderr.flush()
        reply = sys.stdin.readline().strip().casefold()
        if reply in ("y", "yes"):
            return "once"
        if reply in ("a", "always"):
            return "always"
        if reply in ("n", "no", ""):
            return "deny"


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
