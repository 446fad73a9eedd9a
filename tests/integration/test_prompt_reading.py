"""The engine says how far it has read a long prompt, on the real engine with the embedded model
in its own process, as the page uses it: reports in 512-token pieces, rising, all before the first word, and
only when asked for."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.services.container import Services, build_services
from app.settings import load_settings
from backends.base import CancelToken, ChatMessage, Reading, TextDelta, Usage

pytestmark = pytest.mark.integration

LONG = " ".join(f"Lamp {n} was lit at dusk and put out at dawn by the keeper of the light." for n in range(80))


@pytest.fixture
def chat(isolated_home: Path, embedded_model: Path) -> Iterator[Services]:
    """The app's services with the embedded model in its engine process, in a 4096-token context."""
    services = build_services(load_settings(model={"context_length": 4096}))
    list(services.runtime.load(services.model_choice()))
    yield services
    services.close()


def test_a_long_prompts_reading_is_reported_before_the_first_word_and_only_when_asked(chat: Services) -> None:
    messages = [ChatMessage("user", f"{LONG}\n\nWhich lamp came last?")]
    params = dataclasses.replace(chat.generation_params(), max_new_tokens=8, temperature=0.0, report_reading=True)
    with chat.runtime.lease() as engine:
        assert engine.count_chat_tokens(messages) > 1100  # three pieces or more
        events = list(engine.stream_chat(messages, params, CancelToken()))
        plain = list(engine.stream_chat(messages, dataclasses.replace(params, report_reading=False), CancelToken()))
    reads = [e for e in events if isinstance(e, Reading)]
    first_word = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert reads and all(isinstance(e, Reading) for e in events[: len(reads)])  # all of them before any word
    assert len(reads) <= first_word
    done = [r.done for r in reads]
    assert done == sorted(set(done)) and all(0 < d < r.total for d, r in zip(done, reads, strict=True))
    assert len({r.total for r in reads}) == 1 and reads[0].total > 1100  # one prompt, all of it
    # Read in pieces of 512 tokens, after what came from the cache (the beginning the model's first answer shared
    # with this prompt, copied from its slot: the template's own system prompt)
    cached = next(e for e in events if isinstance(e, Usage)).cached_tokens
    assert done[:2] == [cached + 512, cached + 1024]
    assert not any(isinstance(e, Reading) for e in plain)
