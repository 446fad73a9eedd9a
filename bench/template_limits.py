"""What bounded chat-template rendering costs, and how fast hostile templates are refused.

1. Cost per render of the embedded model's template, for a 2- and a 20-message conversation: Jinja's sandbox
   in the same process (a compiled template reused: the floor), the same building a sandbox and compiling per
   render (what Hearth did before the renderer process), and the renderer process with its limits.
2. For each hostile template kind: the time from starting the formatter (renderer start-up included) until
   the template is refused, and the renderer process's peak resident memory. Each kind runs in a fresh Python
   process of its own, so the peak is that renderer's alone (``RUSAGE_CHILDREN`` after it was reaped).
3. Templates that pass the load-time probe and fail at a later turn: how long that turn's render takes.

    .venv/bin/python bench/template_limits.py
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backends.chat_template import ChatFormatter

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

NESTED_LOOP = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
# SMOL stands for the embedded model's own template: each hostile one would otherwise render a good prompt.
HOSTILE = {
    "division by zero": "{{ 1 / 0 }}SMOL",
    "nested range(100000) loop": NESTED_LOOP + "SMOL",
    "9**(9**9)": "{{ 9 ** (9 ** 9) }}SMOL",
    "'a'*10**10": "{{ 'a' * 10 ** 10 }}SMOL",
    "~ doubling": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
    "SMOL",
    "macro recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}SMOL",
    "2**60 macro calls": "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}"
    "SMOL",
    "empty render": "{% if false %}SMOL{% endif %}",
    "5 MB of padding": "{{ 'x' * (messages|length * 5000000) }}SMOL",
    "loop bomb at 7 messages only": "{% if messages|length == 7 %}" + NESTED_LOOP + "{% endif %}SMOL",
}


def smol_template() -> str:
    from models.embedded import embedded_chat_model
    from models.gguf import read_model_info

    template = read_model_info(embedded_chat_model()).chat_template
    assert template
    return template


def per_render_costs(rounds: int) -> None:
    from backends.chat_template import ChatFormatter

    template = smol_template()
    print(f"cost per render of the embedded model's template, median of {rounds} (microseconds)")
    print(f"{'messages':>10}{'in-process, compiled once':>28}{'in-process, compiled each':>28}{'renderer':>12}")
    formatter = ChatFormatter(template, "<|im_start|>", "<|im_end|>")
    formatter.probe()
    assert formatter.fallback_reason is None
    try:
        for count in (2, 20):
            timings = _costs(formatter, template, count, rounds)
            print(f"{count:>10}{timings['once']:>28.0f}{timings['each']:>28.0f}{timings['renderer']:>12.0f}")
            print(f"{'':>10}(the whole formatter.render, checks included: {timings['formatter']:.0f})")
    finally:
        formatter.close()


def _costs(formatter: ChatFormatter, template: str, count: int, rounds: int) -> dict[str, float]:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from backends.base import ChatMessage
    from backends.chat_template import TemplateLimits, allowed_chars
    from backends.template_renderer import Conversation

    limits = TemplateLimits()
    renderer = formatter._renderer  # the bare renderer: what each turn's render pays beyond the policy checks
    assert renderer is not None
    messages = [ChatMessage("system", "You are a helpful assistant.")] + [
        ChatMessage(("user", "assistant")[i % 2], f"Message number {i} with a few words in it.")
        for i in range(count - 1)
    ]
    context = {"messages": [{"role": m.role, "content": m.content} for m in messages]}
    compiled = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(template)

    def each_compiled() -> str:
        fresh = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        return fresh.from_string(template).render(**context, add_generation_prompt=True)

    conversation = Conversation(tuple(messages))
    limit = [allowed_chars(conversation, limits)]
    return {
        "once": _median_us(lambda: compiled.render(**context, add_generation_prompt=True), rounds),
        "each": _median_us(each_compiled, rounds),
        "renderer": _median_us(lambda: renderer.render([conversation], limit, limits.turn_s), rounds),
        "formatter": _median_us(lambda: formatter.render(messages), rounds),
    }


def _median_us(call: object, rounds: int) -> float:
    assert callable(call)
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1e6)
    return statistics.median(samples)


def refusals() -> None:
    print("\nhostile templates (default limits): time until refused, renderer start-up included; renderer peak RSS")
    print(f"{'template':<32}{'refused after s':>16}{'peak MiB':>10}  reason")
    for kind in HOSTILE:
        out = subprocess.run(
            [sys.executable, __file__, "--one", kind], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout
        result = json.loads(out.strip().splitlines()[-1])
        print(f"{kind:<32}{result['seconds']:>16.2f}{result['peak_kib'] / 1024:>10.1f}  {result['reason']}")


LATER = {
    "loop bomb past 8 messages": "{% if messages|length > 8 %}" + NESTED_LOOP + "{% endif %}SMOL",
    "division by zero past 8 messages": "{% if messages|length > 8 %}{{ 1 / 0 }}{% endif %}SMOL",
}


def later_turns() -> None:
    from backends.base import ChatMessage
    from backends.chat_template import build_formatter

    print("\ntemplates that pass the probe and fail at a later turn: time of that turn's render")
    for kind, template in LATER.items():
        with build_formatter(template.replace("SMOL", smol_template()), "<|im_start|>", "<|im_end|>") as formatter:
            assert formatter.fallback_reason is None
            messages = [ChatMessage(("user", "assistant")[i % 2], f"turn {i}") for i in range(9)]
            started = time.perf_counter()
            formatter.render(messages)
            seconds = time.perf_counter() - started
            print(f"{kind:<36}{seconds:>8.2f} s  {formatter.fallback_reason}")


def one(kind: str) -> None:
    from backends.chat_template import build_formatter

    template = HOSTILE[kind].replace("SMOL", smol_template())
    started = time.perf_counter()
    formatter = build_formatter(template, "<|im_start|>", "<|im_end|>")
    seconds = time.perf_counter() - started
    formatter.close()  # reaps the renderer, if it still ran
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"seconds": seconds, "peak_kib": peak_kib, "reason": formatter.fallback_reason}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one)
        return
    per_render_costs(args.rounds)
    refusals()
    later_turns()


if __name__ == "__main__":
    main()
