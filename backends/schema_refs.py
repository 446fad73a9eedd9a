"""References in a JSON schema made ready for llama-cpp-python's converter, which follows them in two ways that would
give the wrong grammar: it reads no further than a reference at a schema's top, and it names a definition's rule
after the definition alone. Pure."""

from __future__ import annotations

import json
from typing import Any


def root_reference_as_union(schema: Any) -> Any:
    """``schema`` with a reference at its top (``{"$ref": "#/$defs/Node", "$defs": ...}``, as pydantic writes a
    recursive model) written as a union of that one reference. The converter follows a top-level reference without
    reading the rest of the top, so the definitions' own references would never be resolved."""
    if not isinstance(schema, dict) or "$ref" not in schema or "anyOf" in schema or "oneOf" in schema:
        return schema
    rest = {key: value for key, value in schema.items() if key != "$ref"}
    return {**rest, "anyOf": [{"$ref": schema["$ref"]}]}


_DEFINITIONS = ("$defs", "definitions")


def own_definitions(schema: Any, prefix: str) -> Any:
    """``schema`` with its definitions (``$defs``, ``definitions``) renamed ``prefix`` + name, and its references to
    them with them. The converter names a definition's rule after the definition alone and reuses a rule of that
    name, so without this a second tool's ``#/$defs/Item`` would be held to the first tool's ``Item``."""
    if not isinstance(schema, dict):
        return schema
    renamed = json.loads(json.dumps(schema))  # a copy to change (the schema is bounded: small and shallow)
    for key in _DEFINITIONS:  # references point at the top's definitions ("#/$defs/Name")
        if isinstance(renamed.get(key), dict):
            renamed[key] = {f"{prefix}{name}": value for name, value in renamed[key].items()}
    pending: list[Any] = [renamed]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        reference = node.get("$ref")
        if isinstance(reference, str):
            for key in _DEFINITIONS:
                start = f"#/{key}/"
                if reference.startswith(start):
                    node["$ref"] = f"{start}{prefix}{reference[len(start) :]}"
        pending.extend(node.values())
    return renamed
