"""Grammars that hold an answer to JSON: any JSON object, or the JSON a schema describes (structured
output). The schema is turned into llama.cpp's GBNF by llama-cpp-python's converter (a port of llama.cpp's own
``json_schema_to_grammar``); llama.cpp then allows, at each step, only the tokens that keep the answer a beginning of
valid JSON for it, so a complete answer always parses and fits the schema.

A schema comes from an API client or a tool server: it is bounded in size and in what it asks the converter to write
out (``backends/schema_bounds.py``) before it is converted, a conversion that fails or produces an oversized grammar
is refused with the reason and the place in the schema, and :func:`check_grammar` lets llama.cpp read the grammar
once before an answer is queued (a grammar llama.cpp cannot read is refused there, not in the middle of a batch).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from backends.base import Grammar
from backends.schema_bounds import overreach
from backends.schema_refs import root_reference_as_union
from models.shared.errors import InvalidChoice

# Generous for real schemas (a pydantic model of a few dozen fields is a few KB); a bound for a hostile one.
MAX_SCHEMA_CHARS = 64_000
MAX_GRAMMAR_CHARS = 256_000
# What an error may quote of a converter's own message (some quote the whole schema back).
MAX_REASON_CHARS = 200
RESPONSE_SCHEMA = "response_format.json_schema.schema"


class SchemaRefused(InvalidChoice):
    """A JSON schema that cannot become a grammar; ``param`` is where in the request the trouble is."""

    def __init__(self, message: str, remedy: str, param: str | None = None) -> None:
        super().__init__(message, remedy)
        self.param = param


# Any JSON object, with at most one line break and a little indentation between items, so a small model cannot
# spend its answer on whitespace.
JSON_OBJECT_GBNF = r"""
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ":" ws value ws ( "," ws string ":" ws value ws )* )? "}"
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( [0-9] | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,4} )?
ws     ::= [ ]? | "\n" [ ]{0,8}
"""


# The converter's rule for a character of a JSON string, and the one Hearth gives instead (as JSON_OBJECT_GBNF has).
_LOOSE_CHAR = r'char ::= [^"\\]'
_STRICT_CHAR = r'char ::= [^"\\\x7F\x00-\x1F]'


def json_object_grammar() -> Grammar:
    return Grammar(JSON_OBJECT_GBNF.strip())


def json_schema_grammar(schema: Mapping[str, Any]) -> Grammar:
    """The grammar of the JSON ``schema`` describes, or :class:`SchemaRefused` saying why there is none."""
    try:
        text = json.dumps(schema)
    except (TypeError, ValueError, RecursionError) as exc:
        raise _refused(f"it is not plain JSON ({converter_said(exc)})") from None
    if len(text) > MAX_SCHEMA_CHARS:
        raise _refused(f"it is {len(text):,} characters long; at most {MAX_SCHEMA_CHARS:,} are read")
    found = overreach(schema)
    if found is not None:
        raise _refused(f"{found.reason} (at {found.path or 'its top'})", inside(RESPONSE_SCHEMA, found.path))
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        gbnf = json_schema_to_gbnf(json.dumps(root_reference_as_union(schema)))
    except RecursionError:
        raise _refused("it nests too deeply") from None
    except Exception as exc:  # the converter raises whatever its parsing hits on a schema it does not follow
        raise _refused(converter_said(exc)) from None
    if len(gbnf) > MAX_GRAMMAR_CHARS:
        raise _refused(f"its grammar would be {len(gbnf):,} characters; at most {MAX_GRAMMAR_CHARS:,} are used")
    return Grammar(strict_strings(gbnf))


def converter_said(exc: BaseException) -> str:
    """A converter's exception in a few words: its type and the start of its message, never a whole schema."""
    said = str(exc)
    if isinstance(exc, KeyError) or said.startswith("Error resolving ref "):
        reference = said.removeprefix("Error resolving ref ").split(": ", 1)[0].strip("'\"")
        return f"its $ref {reference[:MAX_REASON_CHARS]!r} leads to no definition it has"
    said = f"{type(exc).__name__}: {exc}"
    return said if len(said) <= MAX_REASON_CHARS else f"{said[:MAX_REASON_CHARS]}…"


def inside(prefix: str, path: str) -> str:
    """``path`` (within a schema) as a path in the request that holds the schema at ``prefix``."""
    return f"{prefix}.{path}" if path and not path.startswith("[") else f"{prefix}{path}"


def strict_strings(gbnf: str) -> str:
    """``gbnf`` with the characters of its JSON strings held to what JSON allows. llama-cpp-python's schema
    converter lets a string hold any character but a quote or a backslash, so a raw newline or tab could be drawn
    inside one (a small model does), and the JSON would not parse; here control characters must be escaped."""
    lines = gbnf.split("\n")
    return "\n".join(
        _STRICT_CHAR + line[len(_LOOSE_CHAR) :] if line.startswith(_LOOSE_CHAR) else line for line in lines
    )


def check_grammar(vocab: Any, grammar: Grammar) -> None:
    """Let llama.cpp read ``grammar`` against the model's vocabulary; :class:`InvalidChoice` if it cannot."""
    import llama_cpp

    sampler = new_grammar_sampler(vocab, grammar)
    llama_cpp.llama_sampler_free(sampler)


def new_grammar_sampler(vocab: Any, grammar: Grammar) -> Any:
    """llama.cpp's grammar sampler for ``grammar`` (the caller owns it), or :class:`InvalidChoice`."""
    import llama_cpp

    if grammar.triggers:
        import ctypes

        patterns = (ctypes.c_char_p * len(grammar.triggers))(*(t.encode() for t in grammar.triggers))
        no_tokens = (ctypes.c_int32 * 1)()
        sampler = llama_cpp.llama_sampler_init_grammar_lazy_patterns(
            vocab, grammar.gbnf.encode(), grammar.root.encode(), patterns, len(grammar.triggers), no_tokens, 0
        )
    else:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.gbnf.encode(), grammar.root.encode())
    if not sampler:
        raise InvalidChoice(
            "llama.cpp could not read the grammar the answer was to follow.",
            "Send a simpler JSON schema (the engine's log names the rule it stopped at).",
        )
    return sampler


def _refused(reason: str, param: str = RESPONSE_SCHEMA) -> SchemaRefused:
    return SchemaRefused(
        f"The JSON schema in response_format cannot be used: {reason}.",
        "Send a JSON Schema object such as a pydantic model's model_json_schema() gives.",
        param,
    )
