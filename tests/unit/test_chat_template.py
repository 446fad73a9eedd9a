"""Chat templates come from untrusted files: they render only in a sandbox, and a refused one falls back."""

from pathlib import Path

import pytest

from backends.base import ChatMessage
from backends.chat_template import CHATML_TEMPLATE, build_formatter

MESSAGES = [ChatMessage("system", "Be kind."), ChatMessage("user", "Hi there")]
SMOL_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def test_the_models_template_is_used() -> None:
    formatter = build_formatter(SMOL_TEMPLATE, "<s>", "</s>")
    assert formatter.fallback_reason is None
    assert formatter.render(MESSAGES) == (
        "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    )


def test_no_template_means_chatml_and_a_reason() -> None:
    formatter = build_formatter(None, "", "")
    assert formatter.template == CHATML_TEMPLATE
    assert formatter.fallback_reason == "the model has no chat template"


def test_code_execution_payload_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    # The CVE-2024-34359 class of payload: walk from a string to Python's os module through dunder attributes.
    payload = (
        "{% for c in ''.__class__.__mro__[1].__subclasses__() %}"
        "{% if c.__name__ == 'catch_warnings' %}"
        "{{ c()._module.__builtins__['__import__']('os').system('touch " + str(marker) + "') }}"
        "{% endif %}{% endfor %}{{ messages[0]['content'] }}"
    )
    formatter = build_formatter(payload, "", "")
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
    formatter = build_formatter(template, "", "")
    assert formatter.template == CHATML_TEMPLATE
    assert formatter.fallback_reason is not None
    assert reason in formatter.fallback_reason
