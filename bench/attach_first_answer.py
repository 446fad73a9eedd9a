"""How long a file attached to a new conversation takes until the first word of the answer, against the same
question asked with no file, in one run on one loaded model.

Each run starts a new conversation with the file attached and times: reading (the reader process) and splitting,
embedding (to the last embedding step), finding the passages and fitting the prompt (to the turn's start), and the
first token. A first, untimed run starts the reader process and loads the embedding model. Each question is asked
once with the file and once without, so no answer starts from a prompt the model has already read (llama.cpp
reuses a cached prefix).

    HEARTH_HOME=DIR .venv/bin/python bench/attach_first_answer.py --file /usr/share/doc/r-doc-pdf/manual/R-FAQ.pdf \
        --question "How can I save my workspace?" --question "What is CRAN?" --question "…"
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from app.services.answering.turn_settings import TurnSettings


@dataclass
class Timing:
    read_s: float = 0.0  # to the first embedding step
    embed_s: float = 0.0  # from there to the last embedding step
    prompt_s: float = 0.0  # from there to the turn's start (search, fitting)
    first_token_s: float = 0.0  # from the send to the first token
    mode: str = ""


def one_run(services: object, question: str, files: list[Path]) -> Timing:
    from app.services.answering.chat import TurnStarted
    from app.services.container import Services
    from backends.base import GenerationParams, TextDelta
    from rag.attachments import AttachProgress

    assert isinstance(services, Services)
    params = GenerationParams(temperature=0.0, max_new_tokens=32)
    timing = Timing()
    started = time.perf_counter()
    embedding_began = embedding_ended = None
    for event in services.chat.send(None, question, TurnSettings(params, ""), attach=files):
        now = time.perf_counter()
        if isinstance(event, AttachProgress) and event.step == "embedding":
            embedding_began = embedding_began or now
            embedding_ended = now
        elif isinstance(event, TurnStarted):
            if embedding_began and embedding_ended:
                timing.read_s = embedding_began - started
                timing.embed_s = embedding_ended - embedding_began
                timing.prompt_s = now - embedding_ended
            timing.mode = ", ".join(u.words for u in event.attachments)
        elif isinstance(event, TextDelta) and not timing.first_token_s:
            timing.first_token_s = now - started
    return timing


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, required=True)
    parser.add_argument("--question", action="append", required=True, help="one per timed run (repeat it)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    from app.services.container import build_services
    from app.settings import load_settings

    services = build_services(load_settings())
    try:
        for _ in services.runtime.load(services.model_choice()):
            pass
        status = services.runtime.status
        print(f"model: {status.model_name} · context {status.plan.context_length if status.plan else '?'}")
        cold = one_run(services, "Say hello.", [args.file])
        warm = [one_run(services, question, [args.file]) for question in args.question]
        plain = [one_run(services, f"{question} Answer briefly.", []) for question in args.question]
    finally:
        services.close()
    print(f"file: {args.file.name} · {warm[0].mode if warm else cold.mode}")
    print(f"first run (reader process and embedder start): {cold.first_token_s:.2f} s to the first token")
    print(f"modes: {'; '.join(t.mode for t in warm)}")
    print(f"attached, to the first token: {spread([t.first_token_s for t in warm])}")
    print(f"  reading:            {spread([t.read_s for t in warm])}")
    print(f"  splitting+embedding: {spread([t.embed_s for t in warm])}")
    print(f"  search and prompt:  {spread([t.prompt_s for t in warm])}")
    print(f"no file, to the first token: {spread([t.first_token_s for t in plain])}")
    if warm and plain:
        ratio = statistics.median(t.first_token_s for t in warm) / statistics.median(t.first_token_s for t in plain)
        print(f"ratio attached / no file (medians): {ratio:.1f}x")
    if args.json:
        figures = {"cold": vars(cold), "warm": [vars(t) for t in warm], "plain": [vars(t) for t in plain]}
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
