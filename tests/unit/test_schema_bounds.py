"""What a JSON schema may ask of a grammar: counts, pattern quantifiers, properties and depth, each refused at
its place in the schema before a converter writes anything out; real schemas pass."""

from __future__ import annotations

import json

import pytest

from backends.schema_bounds import (
    MAX_DEPTH,
    MAX_PROPERTIES,
    MAX_REPEAT,
    MAX_REPEATS_IN_ALL,
    overreach,
    quantifiers,
)

HUGE = 1_000_000_000


@pytest.mark.parametrize(
    ("schema", "path", "words"),
    [
        ({"type": "string", "minLength": HUGE}, "minLength", "minLength 1,000,000,000 is above 2,000"),
        ({"properties": {"a": {"type": "string", "maxLength": 20_000_000}}}, "properties.a.maxLength", "maxLength"),
        ({"type": "array", "items": {"type": "string"}, "minItems": 2001}, "minItems", "above"),
        ({"type": "array", "maxItems": 1e12}, "maxItems", "above"),
        ({"type": "object", "minProperties": 5000}, "minProperties", "above"),
        ({"type": "object", "maxProperties": 5000}, "maxProperties", "above"),
        ({"$defs": {"A": {"type": "string", "minLength": HUGE}}}, "$defs.A.minLength", "above"),
        ({"anyOf": [{"type": "null"}, {"type": "string", "maxLength": HUGE}]}, "anyOf[1].maxLength", "above"),
        ({"type": "string", "pattern": "^a{1000000}$"}, "pattern", "quantifier {1,000,000}"),
        ({"type": "string", "pattern": "^(ab|c){3,99999}$"}, "pattern", "quantifier {99,999}"),
        ({"type": "string", "pattern": "^[a-z]{0,5000}$"}, "pattern", "above"),
    ],
)
def test_a_count_above_the_bound_is_refused_at_its_place(schema: dict[str, object], path: str, words: str) -> None:
    found = overreach(schema)
    assert found is not None
    assert found.path == path
    assert words in found.reason


def test_many_counts_each_within_the_bound_are_refused_together() -> None:
    fields = {f"f{i}": {"type": "string", "maxLength": MAX_REPEAT} for i in range(MAX_REPEATS_IN_ALL // MAX_REPEAT + 1)}
    found = overreach({"type": "object", "properties": fields})
    assert found is not None and "together with the counts before it" in found.reason
    assert found.path.startswith("properties.f") and found.path.endswith(".maxLength")


def test_a_pattern_repeating_a_long_group_costs_its_length() -> None:
    group = "(" + "x" * 100 + ")"
    assert list(quantifiers(f"^{group}{{300}}$")) == [(300, len(group))]
    found = overreach({"type": "string", "pattern": f"^{group}{{300}}$"})  # 30,000 characters written out
    assert found is not None and found.path == "pattern"


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"^\d{4}-\d{2}-\d{2}$", [(4, 2), (2, 2), (2, 2)]),
        ("^[a-z]{3,8}$", [(8, 5)]),
        ("^a{2,}b$", [(2, 1)]),
        (r"^\{literal\}$", []),
        ("^[{]{2}$", [(2, 3)]),
        ("^(a(b){4}){5}$", [(4, 3), (5, 9)]),
        ("^x{a}$", []),
    ],
)
def test_quantifiers_are_read_with_what_they_repeat(pattern: str, expected: list[tuple[int, int]]) -> None:
    assert list(quantifiers(pattern)) == expected


def test_too_many_properties_and_too_deep_nesting_are_refused() -> None:
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(MAX_PROPERTIES + 1)}}
    found = overreach({"properties": {"inner": wide}})
    assert found is not None and found.path == "properties.inner.properties" and "properties" in found.reason
    deep: dict[str, object] = {"type": "string"}
    for _ in range(MAX_DEPTH * 10):  # far deeper than the bound, still walked without recursion
        deep = {"type": "array", "items": deep}
    found = overreach(deep)
    assert found is not None and "nests deeper" in found.reason and found.path.startswith("items.items")


def test_real_schemas_pass() -> None:
    from pydantic import BaseModel, Field

    class Address(BaseModel):
        street: str = Field(max_length=200)
        postcode: str = Field(pattern=r"^\d{4,5}$")

    class Person(BaseModel):
        name: str = Field(min_length=1, max_length=100)
        emails: list[str] = Field(max_length=10)
        home: Address
        others: list[Address] = []

    assert overreach(Person.model_json_schema()) is None
    assert overreach({"type": "object", "properties": {}}) is None
    assert overreach({"type": "string", "minLength": True}) is None  # not a count; the converter judges it


def test_grammars_refuse_before_converting_and_name_the_field() -> None:
    from backends.base import ToolSpec
    from backends.grammar import SchemaRefused, json_schema_grammar
    from backends.tool_calls import calls_grammar

    with pytest.raises(SchemaRefused) as caught:
        json_schema_grammar({"type": "object", "properties": {"a": {"type": "string", "maxLength": 20_000_000}}})
    assert caught.value.param == "response_format.json_schema.schema.properties.a.maxLength"
    assert "maxLength 20,000,000 is above 2,000 (at properties.a.maxLength)" in caught.value.message
    fine = ToolSpec("fine", "", json.dumps({"type": "object", "properties": {"q": {"type": "string"}}}))
    hostile = ToolSpec("hostile", "", json.dumps({"type": "string", "minLength": HUGE}))
    with pytest.raises(SchemaRefused) as caught:
        calls_grammar((fine, hostile), None, required=True, parallel=False)
    assert caught.value.param == "tools[1].function.parameters.minLength"
    assert "'hostile'" in caught.value.message
    # the field named is the one in the request, also when tool_choice picks the tool
    with pytest.raises(SchemaRefused) as caught:
        calls_grammar((fine, hostile), "hostile", required=False, parallel=False)
    assert caught.value.param == "tools[1].function.parameters.minLength"


def test_a_converter_error_never_quotes_the_whole_schema_back() -> None:
    from backends.grammar import MAX_REASON_CHARS, SchemaRefused, json_schema_grammar

    missing = {"type": "object", "properties": {"a": {"$ref": "#/$defs/none"}}, "description": "z" * 5_000}
    with pytest.raises(SchemaRefused) as caught:
        json_schema_grammar(missing)
    assert "z" * 300 not in caught.value.message
    assert len(caught.value.message) < MAX_REASON_CHARS + 200


def test_each_tool_reads_its_own_definitions() -> None:
    from backends.base import ToolSpec
    from backends.tool_calls import calls_grammar

    def with_item(name: str, field: str) -> ToolSpec:
        item = {"type": "object", "properties": {field: {"type": "integer"}}, "required": [field]}
        schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/Item"}}, "$defs": {"Item": item}}
        return ToolSpec(name, "", json.dumps(schema))

    gbnf = calls_grammar((with_item("one", "first"), with_item("two", "second")), None, True, True).gbnf
    plain = gbnf.replace('\\"', '"')
    assert '"first"' in plain
    assert '"second"' in plain  # the second tool's Item, not the first's read again


def test_a_recursive_model_converts_and_a_reference_that_leads_nowhere_is_named() -> None:
    from pydantic import BaseModel

    from backends.base import ToolSpec
    from backends.grammar import SchemaRefused, json_schema_grammar
    from backends.tool_calls import calls_grammar

    class Node(BaseModel):
        name: str
        children: list[Node] = []

    schema = Node.model_json_schema()
    assert schema["$ref"] == "#/$defs/Node"  # pydantic's shape for a recursive model: a reference at the top
    assert "Node ::=" in json_schema_grammar(schema).gbnf
    assert "tool0-Node ::=" in calls_grammar((ToolSpec("tree", "", json.dumps(schema)),), None, True, False).gbnf
    with pytest.raises(SchemaRefused) as caught:
        json_schema_grammar({"$ref": "#/$defs/Gone", "$defs": {"Node": {"$ref": "#/$defs/Gone"}}})
    assert "KeyError" not in caught.value.message
