"""Time to first token of an answer from documents, split into embed / search / prefill, against raw
llama-cpp-python answering the very same prompt in the same run.

Indexes the test corpus (tests/data/corpus) into a throwaway collection, then for each question of
tests/data/retrieval-qa.jsonl: Hearth's chat service answers from the collection (embed the question, hybrid
search, pack the passages, prefill, first token), and a bare llama_cpp.Llama on the same GGUF gets the exact
messages Hearth built. The order alternates per question so drift hits both sides alike. Medians are reported.

    .venv/bin/python bench/rag_answer.py --runs 8
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SYSTEM = "You are a helpful assistant."


def time_hearth(services: Any, question: str, params: Any) -> dict[str, float]:
    """Hearth's whole path, from the question to the first piece of text, and its parts."""
    from app.services.chat import TurnStarted
    from backends.base import TextDelta

    started = time.perf_counter()
    events = services.chat.send(None, question, params, SYSTEM, collection="bench")
    head = next(events)
    assert isinstance(head, TurnStarted)
    next(e for e in events if isinstance(e, TextDelta) and e.text)
    ttft = (time.perf_counter() - started) * 1000
    for _ in events:
        pass
    return {
        "embed_ms": head.embed_ms,
        "search_ms": head.retrieve_ms - head.embed_ms,
        "hearth_ttft_ms": ttft,
        "prompt_tokens": head.prompt_tokens,
    }


def time_raw(raw: Any, messages: list[dict[str, str]], max_tokens: int) -> float:
    started = time.perf_counter()
    ttft = 0.0
    for chunk in raw.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=0.0, stream=True):
        if not ttft and chunk["choices"][0]["delta"].get("content"):
            ttft = (time.perf_counter() - started) * 1000
    return ttft


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8, help="questions to time (default 8)")
    parser.add_argument("--max-tokens", type=int, default=16, help="tokens per answer (default 16)")
    args = parser.parse_args()

    from app.bench import open_raw_llama
    from app.services.ask import find_sources
    from app.services.container import build_services
    from app.settings import load_settings
    from backends.base import GenerationParams
    from rag.prompt import rag_question, rag_system_prompt

    questions = [json.loads(line)["question"] for line in (ROOT / "tests/data/retrieval-qa.jsonl").open()]
    params = GenerationParams(temperature=0.0, max_new_tokens=args.max_tokens, repeat_penalty=1.0)
    rows: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as home:
        services = build_services(load_settings(home=home))
        try:
            for _ in services.runtime.load(services.model_choice()):
                pass
            documents = services.documents.get()
            for _ in documents.ingestor.ingest([ROOT / "tests/data/corpus"], "bench"):
                pass
            plan, model = services.runtime.status.plan, services.runtime.model
            assert plan is not None and model is not None
            raw = open_raw_llama(model.path, plan.context_length, plan.threads)
            documents.retriever.search("bench", "warm up", top_k=1)  # keyword index built, model loaded
            for index in range(args.runs):
                question = questions[index % len(questions)]
                system = rag_system_prompt(SYSTEM)
                with services.runtime.lease() as engine:
                    found = find_sources(
                        documents, engine, "bench", question, system, params, services.settings.rag.top_k
                    )
                messages = [
                    {"role": "system", "content": system},
                    {"role": "user", "content": rag_question(question, found.sources)},
                ]

                if index % 2:
                    row = time_hearth(services, question, params)
                    row["raw_ttft_ms"] = time_raw(raw, messages, args.max_tokens)
                else:
                    raw_ms = time_raw(raw, messages, args.max_tokens)
                    row = time_hearth(services, question, params) | {"raw_ttft_ms": raw_ms}
                rows.append(row)
            raw.close()
        finally:
            services.close()

    def median(key: str) -> float:
        return float(statistics.median(row[key] for row in rows))

    print(f"{model.display_name} on {plan.label}; {len(rows)} questions, medians")
    print(f"prompt tokens                     {median('prompt_tokens'):>8.0f}")
    print(f"embed the question (ms)           {median('embed_ms'):>8.1f}")
    print(f"hybrid search (ms)                {median('search_ms'):>8.1f}")
    prefill = median("hearth_ttft_ms") - median("embed_ms") - median("search_ms")
    print(f"prefill + first token (ms)        {prefill:>8.1f}")
    print(f"Hearth time to first token (ms)   {median('hearth_ttft_ms'):>8.1f}")
    print(f"raw llama-cpp-python, same prompt {median('raw_ttft_ms'):>8.1f}")
    print(f"Hearth / raw                      {median('hearth_ttft_ms') / median('raw_ttft_ms'):>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
