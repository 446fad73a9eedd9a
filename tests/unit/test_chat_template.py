"""Chat templates come from untrusted files: they render only in a sandbox, in a renderer process with a time
and memory budget, and a template that fails in any way (at load or at a later turn) falls back to ChatML with
the reason. Each hostile kind must be refused within its budget: the pytest timeouts say "instead of hanging"."""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from backends.base import ChatMessage
from backends.chat_template import (
    CHATML_TEMPLATE,
    PROBE_MESSAGES,
    TemplateLimits,
    build_formatter,
    check_prompt,
    probe_conversations,
    render_chatml,
)
from backends.template_renderer import Conversation, TemplateRenderer

MESSAGES = [ChatMessage("system", "Be kind."), ChatMessage("user", "Hi there")]
SMOL_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Small budgets keep the suite quick; the kernel and the parent enforce them the same way as the defaults.
LIMITS = TemplateLimits(probe_s=1.0, turn_s=1.0)
# A template that behaves for every conversation the probe renders (1 to 8 messages) and misbehaves after.
LATER = "{% if messages|length > 8 %}BAD{% endif %}" + SMOL_TEMPLATE


def long_conversation(count: int) -> list[ChatMessage]:
    return [ChatMessage(("user", "assistant")[i % 2], f"turn {i}") for i in range(count)]


def test_the_models_template_is_used() -> None:
    with build_formatter(SMOL_TEMPLATE, "<s>", "</s>", LIMITS) as formatter:
        assert formatter.fallback_reason is None
        assert formatter.render(MESSAGES) == (
            "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
        )
        assert formatter.render(MESSAGES, add_generation_prompt=False).endswith("Hi there<|im_end|>\n")


def test_no_template_means_chatml_and_a_reason() -> None:
    with build_formatter(None, "", "") as formatter:
        assert formatter.template == CHATML_TEMPLATE
        assert formatter.fallback_reason == "the model has no chat template"
        assert formatter.render(MESSAGES) == render_chatml(MESSAGES)


def test_code_execution_payload_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    # The CVE-2024-34359 class of payload: walk from a string to Python's os module through dunder attributes.
    payload = (
        "{% for c in ''.__class__.__mro__[1].__subclasses__() %}"
        "{% if c.__name__ == 'catch_warnings' %}"
        "{{ c()._module.__builtins__['__import__']('os').system('touch " + str(marker) + "') }}"
        "{% endif %}{% endfor %}{{ messages[0]['content'] }}"
    )
    with build_formatter(payload, "", "", LIMITS) as formatter:
        assert not marker.exists()
        assert formatter.template == CHATML_TEMPLATE
        assert formatter.fallback_reason is not None
        assert "SecurityError" in formatter.fallback_reason
        formatter.render(MESSAGES)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("template", "reason"),
    [
        ("{{ raise_exception('roles must alternate') }}", "roles must alternate"),
        ("{% for m in messages %}{{ m.content", "TemplateSyntaxError"),
        ("{{ messages[99]['content'] }}", "UndefinedError"),
    ],
)
def test_broken_templates_fall_back_with_the_reason(template: str, reason: str) -> None:
    with build_formatter(template, "", "", LIMITS) as formatter:
        assert formatter.template == CHATML_TEMPLATE
        assert formatter.fallback_reason is not None
        assert reason in formatter.fallback_reason


# Each hostile kind, as a GGUF could carry it; the content at the end makes it a template that would otherwise
# pass the probe. The reason is what the person is told.
HOSTILE = {
    "division by zero": ("{{ 1 / 0 }}", "ZeroDivisionError"),
    "nested range loop": (
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}" + SMOL_TEMPLATE,
        "did not finish rendering within 1 s",
    ),
    "huge power": ("{{ 9 ** (9 ** 9) }}" + SMOL_TEMPLATE, "did not finish rendering within 1 s"),
    "huge repetition": ("{{ 'a' * 10 ** 10 }}" + SMOL_TEMPLATE, "needed more than 256 MB of memory"),
    "string doubling with ~": (
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
        + SMOL_TEMPLATE,
        "refused: it ",  # memory or time, whichever the machine reaches first
    ),
    "macro recursion": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "RecursionError"),
    "exponential macro calls, no range": (
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}" + SMOL_TEMPLATE,
        "did not finish rendering within 1 s",
    ),
    "a loop over a long string, no range": (
        "{% for c in 'x' * 50000000 %}{% endfor %}" + SMOL_TEMPLATE,
        "did not finish rendering within 1 s",
    ),
    "empty render": ("{% if false %}{{ messages }}{% endif %}", "rendered an empty prompt"),
    "whitespace render": ("   \n  ", "rendered an empty prompt"),
    "absurd length": ("{{ 'x' * (messages|length * 5000000) }}" + SMOL_TEMPLATE, "absurdly long prompt of 5,000,"),
    "long for one conversation only": (
        "{% if messages|length == 5 %}{{ 'x' * 100000 }}{% endif %}" + SMOL_TEMPLATE,
        "absurdly long prompt of 100,",
    ),
    "drops the question": ("{{ bos_token }}hello", "left out the user's message"),
    "misbehaves only at 7 messages": (
        "{% if messages|length == 7 %}{{ 1 / 0 }}{% endif %}" + SMOL_TEMPLATE,
        "ZeroDivisionError: division by zero (for 7 messages",
    ),
    "loops only at 7 messages": (
        "{% if messages|length == 7 %}{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}"
        "{% endfor %}{% endif %}" + SMOL_TEMPLATE,
        "did not finish rendering within 1 s (for 7 messages, without a system message)",
    ),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", HOSTILE)
def test_hostile_templates_are_refused_within_their_budget(kind: str) -> None:
    template, reason = HOSTILE[kind]
    with build_formatter(template, "<s>", "</s>", LIMITS) as formatter:
        assert formatter.template == CHATML_TEMPLATE
        assert formatter.fallback_reason is not None
        assert formatter.fallback_reason.startswith("its chat template was refused: ")
        assert reason in formatter.fallback_reason
        assert formatter.render(MESSAGES) == render_chatml(MESSAGES)


# The model's own format, told apart from ChatML by the BOS text it starts with.
GOOD = "{{ bos_token }}" + SMOL_TEMPLATE
NESTED_LOOP = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("template", "reason"),
    [
        (
            "{% if messages|length > 8 %}{{ 1 / 0 }}{% endif %}" + GOOD,
            "ZeroDivisionError: division by zero (at a turn of 9 messages)",
        ),
        ("{% if messages|length > 8 %}" + NESTED_LOOP + "{% endif %}" + GOOD, "within 1 s (at a turn of 9 messages)"),
        ("{% if messages|length < 9 %}" + GOOD + "{% endif %}", "rendered an empty prompt (at a turn of 9 messages)"),
    ],
)
def test_a_template_that_fails_only_at_a_later_turn_falls_back_from_that_turn_on(template: str, reason: str) -> None:
    with build_formatter(template, "<s>", "</s>", LIMITS) as formatter:
        assert formatter.fallback_reason is None
        short = long_conversation(3)
        assert formatter.render(short).startswith("<s><|im_start|>user\nturn 0")
        assert formatter.render(long_conversation(9)) == render_chatml(long_conversation(9))
        assert formatter.fallback_reason is not None
        assert reason in formatter.fallback_reason
        assert formatter.template == CHATML_TEMPLATE
        assert formatter.render(short) == render_chatml(short)  # from then on


@pytest.mark.timeout(30)
def test_other_renders_wait_at_most_one_budget_behind_a_hostile_one() -> None:
    """Two answers at once: one hits a loop bomb; the other is rendered before it, or waits for it to be cut
    off and then gets ChatML. Neither hangs."""
    template = "{% if messages|length > 8 %}" + NESTED_LOOP + "{% endif %}" + GOOD
    with build_formatter(template, "<s>", "</s>", LIMITS) as formatter:
        results: dict[str, str] = {}
        hostile = threading.Thread(target=lambda: results.update(hostile=formatter.render(long_conversation(9))))
        hostile.start()
        results["other"] = formatter.render(MESSAGES)
        hostile.join()
        assert results["hostile"] == render_chatml(long_conversation(9))
        assert results["other"] in (render_chatml(MESSAGES), "<s>" + render_chatml(MESSAGES))
        assert formatter.fallback_reason is not None


@pytest.mark.timeout(20)
def test_closing_ends_a_render_in_progress_at_once() -> None:
    """A model being closed (a switch, a cancelled load) need not wait for a render's budget to run out."""
    template = "{% if messages|length > 8 %}" + NESTED_LOOP + "{% endif %}" + GOOD
    formatter = build_formatter(template, "<s>", "</s>", TemplateLimits(probe_s=1.0, turn_s=600.0))
    assert formatter.fallback_reason is None
    done = threading.Event()
    worker = threading.Thread(target=lambda: (formatter.render(long_conversation(9)), done.set()))
    worker.start()
    assert not done.wait(1.0)  # still rendering: its budget is ten minutes, its loop longer
    formatter.close()
    worker.join()
    assert done.is_set()


def test_the_probe_covers_every_shape_hearth_sends() -> None:
    conversations = probe_conversations()
    counts = {len(c.messages) for c in conversations}
    assert counts == set(range(1, PROBE_MESSAGES + 1))
    shapes = {(c.messages[0].role == "system", c.add_generation_prompt) for c in conversations}
    assert shapes == {(False, False), (False, True), (True, False), (True, True)}
    for conversation in conversations:
        turns = [m.role for m in conversation.messages if m.role != "system"]
        assert turns[0] == "user"
        assert all(a != b for a, b in itertools.pairwise(turns))  # roles alternate
        assert conversation.add_generation_prompt == (turns[-1] == "user")


@pytest.mark.parametrize(
    ("prompt", "problem"),
    [
        ("<s>Probe user message 1.", None),
        ("", "empty prompt"),
        (" \n\t", "empty prompt"),
        ("Probe user message 1." + "x" * 40_000, "absurdly long prompt"),
        ("<s>", "left out the user's message"),
    ],
)
def test_check_prompt(prompt: str, problem: str | None) -> None:
    conversation = Conversation((ChatMessage("user", "Probe user message 1."),), True)
    found = check_prompt(conversation, prompt, TemplateLimits(), probing=True)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_chatml_without_a_template_engine_matches_the_chatml_template() -> None:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    for add in (True, False):
        expected = env.from_string(CHATML_TEMPLATE).render(
            messages=[{"role": m.role, "content": m.content} for m in MESSAGES], add_generation_prompt=add
        )
        assert render_chatml(MESSAGES, add) == expected


@pytest.mark.timeout(60)
def test_a_long_legitimate_conversation_keeps_the_template() -> None:
    """What a user sends cannot get a good template refused: near the input limit it still renders (its budget
    grows with its length), and past it the turn is written in ChatML without refusing the template."""
    limits = TemplateLimits()
    text = "Ünïcödé text with emoji 🙂 and plenty of words. " * 40_000  # about 1.9 million characters
    with build_formatter(GOOD, "<s>", "</s>", limits) as formatter:
        long_turn = [ChatMessage("user", text)]
        assert formatter.render(long_turn) == "<s>" + render_chatml(long_turn)
        too_long = [ChatMessage("user", text * 2)]
        assert formatter.render(too_long) == render_chatml(too_long)
        assert formatter.fallback_reason is None
        assert formatter.render(MESSAGES) == "<s>" + render_chatml(MESSAGES)


@pytest.mark.timeout(30)
def test_a_renderer_that_died_between_renders_is_started_again() -> None:
    renderer = TemplateRenderer(GOOD, "<s>", "</s>", TemplateLimits().memory_bytes)
    try:
        one = [Conversation(tuple(MESSAGES))]
        assert renderer.render(one, [10_000], 5.0) == ["<s>" + render_chatml(MESSAGES)]
        first = renderer.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        while renderer.pid == first:  # until it is seen to be gone
            time.sleep(0.01)
        assert renderer.render(one, [10_000], 5.0) == ["<s>" + render_chatml(MESSAGES)]
        assert renderer.pid not in (None, first)
    finally:
        renderer.close()
    assert renderer.pid is None
