"""Answers held to a grammar with the real llama.cpp and the embedded 135M model,
which on its own writes no reliable JSON: through the grammar every complete answer parses and fits its schema,
in the engine process as the API uses it; a grammar llama.cpp cannot read, or a backend that cannot hold one, is
refused before anything is written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from backends.base import (
    CancelToken,
    ChatEvent,
    ChatMessage,
    Finished,
    GenerationParams,
    Grammar,
    LoadOptions,
    TextDelta,
)
from backends.engine.client import EngineProcess
from backends.grammar import json_object_grammar, json_schema_grammar
from backends.llamacpp.backend import LlamaCppBackend
from models.gguf import read_model_info
from models.shared.errors import InvalidChoice
from tests.helpers import write_tiny_gguf

pytestmark = pytest.mark.integration


class Ship(BaseModel):
    name: str = Field(max_length=24)
    crew: int
    flags: list[Annotated[str, Field(max_length=24)]] = Field(max_length=3)
    moored: bool


ASKED = [ChatMessage("user", "Describe a fishing boat as JSON.")]


def written(events: list[ChatEvent]) -> tuple[str, str | None]:
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    reasons = [e.reason for e in events if isinstance(e, Finished)]
    return text, reasons[-1] if reasons else None


def test_every_answer_under_a_schema_parses_and_fits_it(llama: LlamaCppBackend) -> None:
    grammar = json_schema_grammar(Ship.model_json_schema())
    answers = []
    for seed in (1, 2, 3):  # sampled, not only the likeliest tokens
        params = GenerationParams(temperature=0.8, max_new_tokens=300, seed=seed, grammar=grammar)
        text, reason = written(list(llama.stream_chat(ASKED, params, CancelToken())))
        assert reason == "stop", text
        answers.append(Ship.model_validate_json(text))
    assert len({a.model_dump_json() for a in answers}) > 1  # the draws differ; each still fits
    # Without the grammar the same model does not write this JSON (what the grammar is for).
    plain, _ = written(
        list(llama.stream_chat(ASKED, GenerationParams(temperature=0, max_new_tokens=200), CancelToken()))
    )
    with pytest.raises(ValueError):
        Ship.model_validate_json(plain)


def test_any_json_object_and_prompt_lookup_leave_the_grammar_in_charge(llama: LlamaCppBackend) -> None:
    asked = [ChatMessage("user", "Give the largest city of France and its population as JSON.")]
    params = GenerationParams(temperature=0, max_new_tokens=200, grammar=json_object_grammar(), prompt_lookup=True)
    text, reason = written(list(llama.stream_chat(asked, params, CancelToken())))
    assert reason == "stop" and isinstance(json.loads(text), dict)


def test_a_grammar_llamacpp_cannot_read_is_refused_before_anything_is_written(llama: LlamaCppBackend) -> None:
    for broken in (Grammar('root ::= "a" missing'), Grammar('root ::= "a"', root="nowhere"), Grammar("root ::= (")):
        params = GenerationParams(temperature=0, max_new_tokens=8, grammar=broken)
        with pytest.raises(InvalidChoice, match="could not read the grammar"):
            next(iter(llama.stream_chat(ASKED, params, CancelToken())))
    # the engine goes on answering
    text, reason = written(
        list(llama.stream_chat(ASKED, GenerationParams(temperature=0, max_new_tokens=4), CancelToken()))
    )
    assert text and reason == "length"


@pytest.fixture
def fake_engine(tmp_path: Path) -> Iterator[EngineProcess]:
    engine = EngineProcess(
        "fake", read_model_info(write_tiny_gguf(tmp_path / "tiny.gguf")), LoadOptions(context_length=512, threads=1)
    )
    list(engine.start())
    yield engine
    engine.close()


def test_a_backend_that_cannot_hold_a_grammar_refuses_it(fake_engine: EngineProcess) -> None:
    params = GenerationParams(max_new_tokens=8, grammar=json_object_grammar())
    with pytest.raises(InvalidChoice, match="cannot hold an answer to a JSON schema"):
        list(fake_engine.stream_chat(ASKED, params, CancelToken()))
    assert written(list(fake_engine.stream_chat(ASKED, GenerationParams(max_new_tokens=8), CancelToken())))[0]
