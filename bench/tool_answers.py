"""Does the answer after a tool's result come out right? (The page's and the terminal's tool loop.)

``hearth eval tools`` measures the first step, the call; this measures the whole answer a user sees: each question
of ``bench/data/tool-answers.jsonl`` (arithmetic in a user's own words, with the number a right answer holds) goes
through the product's loop (``app.tools.loop.answer_with_tools``, the calculator offered, every call allowed,
greedy), and the answer counts as right when its final text holds the number. ``--max-calls 1`` is the loop
answering without tools after one call (the model only reads the result); the default lets it call again.

    .venv/bin/python bench/tool_answers.py --model MODEL.gguf --part tuning --max-calls 8 --json F

Run alone on a quiet machine for its times; the right/wrong counts do not depend on load (greedy decoding).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from app.services.answering.tool_turn import fitted_stream
from app.services.container import build_services
from app.settings import load_settings
from app.tools.consent import ConsentBook
from app.tools.loop import CallDone, LoopNote, answer_with_tools
from app.tools.toolbox import tools_box
from backends.base import CancelToken, ChatMessage, TextDelta

QUESTIONS = Path(__file__).parent / "data" / "tool-answers.jsonl"


def holds(text: str, number: str) -> bool:
    """Whether ``text`` states ``number`` (thousands separators and trailing zeros of decimals aside)."""
    found = {_normal(m) for m in re.findall(r"\d[\d,]*(?:\.\d+)?", text)}
    return _normal(number) in found


def _normal(figure: str) -> str:
    plain = figure.replace(",", "")
    return plain.rstrip("0").rstrip(".") if "." in plain else plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--part", choices=["tuning", "held-out"], required=True)
    parser.add_argument("--max-calls", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    questions = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    chosen = [q for q in questions if q["part"] == args.part]
    with tempfile.TemporaryDirectory() as home:
        settings = load_settings(home=Path(home), model={"path": args.model, "context_length": 4096})
        services = build_services(settings)
        try:
            list(services.runtime.load(services.model_choice()))
            params = dataclasses.replace(services.generation_params(), temperature=0.0, max_new_tokens=args.max_tokens)
            consent = ConsentBook(Path(home) / "consent.json")
            rows: list[dict[str, Any]] = []
            for question in chosen:
                started = time.perf_counter()
                messages = [
                    ChatMessage("system", settings.generation.system_prompt),
                    ChatMessage("user", question["question"]),
                ]
                text, calls, notes = [], [], []
                with services.runtime.lease() as engine:
                    stream = fitted_stream(engine, CancelToken(), "")
                    box = tools_box([], 60.0)
                    loop = answer_with_tools(stream, messages, params, box, lambda _: "once", consent, args.max_calls)
                    for event in loop:
                        if isinstance(event, TextDelta):
                            text.append(event.text)
                        elif isinstance(event, CallDone):
                            calls.append({"arguments": event.call.arguments, "result": event.result})
                        elif isinstance(event, LoopNote):
                            notes.append(event.text)
                answer = "".join(text)
                right = holds(answer, question["answer"])
                rows.append(
                    {
                        "question": question["question"],
                        "expected": question["answer"],
                        "answer": answer,
                        "calls": calls,
                        "notes": notes,
                        "right": right,
                        "seconds": round(time.perf_counter() - started, 1),
                    }
                )
                mark = "RIGHT" if right else "wrong"
                print(f"{mark} calls={len(calls)} {question['question'][:60]!r} -> {answer[:100]!r}", flush=True)
        finally:
            services.close()
    right = sum(r["right"] for r in rows)
    called = sum(bool(r["calls"]) for r in rows)
    print(f"{args.part}, max calls {args.max_calls}: {right}/{len(rows)} right, {called} with a call")
    if args.json:
        summary = {"part": args.part, "max_calls": args.max_calls, "model": args.model.name, "right": right}
        summary |= {"questions": len(rows), "with_a_call": called, "rows": rows}
        args.json.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
