"""Passages read once (issue 39, item 1), measured at the engine before the scheduler uses it: the time to the first
word of an answer from documents when the passages' caches, kept from an earlier question, are joined into the
sequence instead of read, against reading the whole prompt, with raw llama-cpp-python reading the same tokens in
the same run; and whether the greedy answer stays the same.

The prompt is Hearth's own for a question from documents (its system prompt and its passage layout,
``rag.prompt``), rendered by the model's chat template and cut at the passages (``backends.llamacpp.prompt_spans``).
Three passages of a held-out text (the Apache License 2.0) answer each question; for every question the passages
come in another order, so their kept caches are joined at other positions than they were read at (llama.cpp turns
their keys for the new places). The caches come from the previous question's reading, as they would in use: a
passage's keys and values then also carry what was read before it there (the approximation a joined cache makes;
``--recompute N`` reads the first N tokens of every passage again instead, as CacheBlend recomputes a share).

For each question, alternating the order between runs:

- read: the sequence holds the system prompt (as a slot keeps it between questions) and the rest is read in
  512-token pieces, as the engine does;
- joined: the same start, then each passage's glue read and its kept cache joined, then the question read;
- raw: llama-cpp-python's ``Llama`` reads the whole prompt's tokens and writes one.

    .venv/bin/python bench/passage_join.py --model PATH.gguf --runs 3 --json bench/data/passage-join.NAME.json
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEXT = ROOT / "models" / "data" / "heldout-apache-2.0.txt"
QUESTIONS = [
    "What does the license say about using the Licensor's trade names and trademarks?",
    "Is the Work provided with any warranty?",
    "When does the patent license granted to a contributor end?",
    "What must a redistribution of the Work include?",
]
PASSAGE_MARKERS = ("6. Trademarks.", "7. Disclaimer of Warranty.", "3. Grant of Patent License.", "4. Redistribution.")


def passages(count: int) -> list[str]:
    """The sections of the license the questions are about, each cut to about a passage's length."""
    text = TEXT.read_text(encoding="utf-8")
    found = []
    for marker in PASSAGE_MARKERS[:count]:
        start = text.index(marker)
        found.append(" ".join(text[start : start + 900].split()))
    return found


class Reader:
    def __init__(self, model: Any, batch_tokens: int) -> None:
        from backends.llamacpp.native import TokenBatch

        self.model = model
        self.batch = TokenBatch(batch_tokens)

    def read(self, tokens: list[int], start: int) -> int:
        """Read ``tokens`` into sequence 0 from ``start`` in pieces of the batch's size; the greedy next token."""
        import llama_cpp

        for offset in range(0, len(tokens), self.batch.capacity):
            piece = tokens[offset : offset + self.batch.capacity]
            self.batch.clear()
            for index, token in enumerate(piece):
                last = offset + index == len(tokens) - 1
                self.batch.add(token, start + offset + index, 0, last)
            assert self.model.decode(self.batch) == 0
        return _argmax(llama_cpp.llama_get_logits_ith(self.model.ctx, self.batch.size - 1), self.model)

    def answer(self, first: int, position: int, count: int) -> list[int]:
        written = [first]
        while len(written) < count and not self.model.is_end_of_generation(written[-1]):
            written.append(self.read([written[-1]], position))
            position += 1
        return written


def _argmax(scores: Any, model: Any) -> int:
    import numpy as np

    return int(np.argmax(np.ctypeslib.as_array(scores, shape=(model.vocab_size,))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="a GGUF (default: the embedded model)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--recompute", type=int, default=0, help="tokens at the start of each passage read again")
    parser.add_argument("--answer-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from app.bench.chat import open_raw_llama
    from app.bench.stats import report, summarise
    from backends.base import ChatMessage, LoadOptions
    from backends.chat_template import ChatFormatter
    from backends.llamacpp.backend import route_llama_logs
    from backends.llamacpp.native import BATCH_TOKENS, NativeModel
    from backends.llamacpp.prompt_spans import segments, tokenized
    from models.embedded import embedded_chat_model
    from models.gguf import read_model_info
    from rag.prompt import Source, rag_question, rag_system_prompt

    route_llama_logs()
    path = args.model or embedded_chat_model()
    info = read_model_info(path)
    context = 4096
    model = NativeModel(path, LoadOptions(context_length=context, threads=args.threads))
    formatter = ChatFormatter(info.chat_template, info.bos_token, info.eos_token)
    reader = Reader(model, BATCH_TOKENS)
    system = rag_system_prompt("")
    texts = passages(3)

    def prompt_for(question: int) -> tuple[list[int], list[Any], list[str]]:
        order = [texts[(question + i) % len(texts)] for i in range(len(texts))]
        sources = [Source(n + 1, "apache-2.0.txt", None, None, t) for n, t in enumerate(order)]
        messages = [ChatMessage("system", system), ChatMessage("user", rag_question(QUESTIONS[question], sources))]
        rendered = formatter.render_chat(messages)
        bos = not (formatter.bos_token and rendered.startswith(formatter.bos_token))
        tokens, spans = tokenized(
            segments(rendered, order), lambda text, first: model.tokenize(text, first and bos, True)
        )
        assert len(spans) == len(order), "every passage must be found in the rendered prompt"
        return tokens, spans, order

    def system_tokens() -> int:
        """How many tokens the system prompt takes at the start (what a slot keeps between questions)."""
        alone = formatter.render_chat([ChatMessage("system", system), ChatMessage("user", "x")])
        head = alone[: alone.index("x")]
        return len(model.tokenize(head, True, True)) - 1

    kept_prefix = system_tokens()
    kept: dict[str, tuple[bytes, int]] = {}  # passage -> (its cache, where it was read)

    def read_whole(tokens: list[int]) -> tuple[float, list[int]]:
        model.forget(0)
        reader.read(tokens[:kept_prefix], 0)
        began = time.perf_counter()
        first = reader.read(tokens[kept_prefix:], kept_prefix)
        elapsed = time.perf_counter() - began
        return elapsed, reader.answer(first, len(tokens), args.answer_tokens)

    def keep(tokens: list[int], spans: list[Any], order: list[str]) -> None:
        model.forget(0)
        reader.read(tokens, 0)
        for span, text in zip(spans, order, strict=True):
            kept[text] = (model.span_state(0, span.start, span.stop), span.start)

    def joined(tokens: list[int], spans: list[Any], order: list[str]) -> tuple[float, list[int], int]:
        model.forget(0)
        reader.read(tokens[:kept_prefix], 0)
        began = time.perf_counter()
        at, joined_tokens = kept_prefix, 0
        for span, text in zip(spans, order, strict=True):
            state, computed_at = kept[text]
            fresh = min(args.recompute, len(span))
            reader.read(tokens[at : span.start + fresh], at)  # the glue, and the passage's first tokens again
            cut = _without_first(model, state, computed_at, fresh) if fresh else state
            assert model.join_span(0, cut, computed_at + fresh, span.start + fresh)
            at = span.stop
            joined_tokens += len(span) - fresh
        first = reader.read(tokens[at:], at)
        elapsed = time.perf_counter() - began
        return elapsed, reader.answer(first, len(tokens), args.answer_tokens), joined_tokens

    raw = open_raw_llama(path, context, args.threads, n_batch=BATCH_TOKENS)

    def raw_ms(tokens: list[int]) -> float:
        raw.reset()
        began = time.perf_counter()
        raw.create_completion(tokens, max_tokens=1, temperature=0.0)
        return (time.perf_counter() - began) * 1000

    rows: list[dict[str, Any]] = []
    try:
        first_tokens, first_spans, first_order = prompt_for(0)
        keep(first_tokens, first_spans, first_order)  # the passages as an earlier question read them
        for run in range(args.runs):
            for question in range(1, len(QUESTIONS)):
                tokens, spans, order = prompt_for(question)
                ways = ["read", "joined", "raw"] if run % 2 == 0 else ["raw", "joined", "read"]
                row: dict[str, Any] = {"run": run, "question": QUESTIONS[question], "prompt_tokens": len(tokens)}
                for way in ways:
                    if way == "read":
                        seconds, answer = read_whole(tokens)
                        row |= {"read_ms": seconds * 1000, "read_answer": answer}
                    elif way == "joined":
                        seconds, answer, from_cache = joined(tokens, spans, order)
                        row |= {"joined_ms": seconds * 1000, "joined_answer": answer, "from_cache": from_cache}
                    else:
                        row["raw_ms"] = raw_ms(tokens)
                row["same_answer"] = row["read_answer"] == row["joined_answer"]
                row["read_text"] = b"".join(model.piece(t) for t in row.pop("read_answer")).decode(errors="replace")
                row["joined_text"] = b"".join(model.piece(t) for t in row.pop("joined_answer")).decode(errors="replace")
                rows.append(row)
                print(
                    f"run {run + 1} q{question}: read {row['read_ms']:.0f} ms, joined {row['joined_ms']:.0f} ms, "
                    f"raw {row['raw_ms']:.0f} ms, same answer {row['same_answer']}",
                    flush=True,
                )
    finally:
        raw.close()
        formatter.close()
        model.close()

    result = {
        "command": "bench/passage_join.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "model": path.name,
        "threads": args.threads,
        "recompute_tokens": args.recompute,
        "passage_tokens": sorted({r["from_cache"] for r in rows}),
        "ms": {way: summarise([r[f"{way}_ms"] for r in rows]) for way in ("read", "joined", "raw")},
        "ratios": {
            "joined / read": summarise([r["joined_ms"] / r["read_ms"] for r in rows]),
            "joined / raw": summarise([r["joined_ms"] / r["raw_ms"] for r in rows]),
            "read / raw": summarise([r["read_ms"] / r["raw_ms"] for r in rows]),
        },
        "same_answer": f"{sum(r['same_answer'] for r in rows)} of {len(rows)}",
        "rows": rows,
    }
    report(result, args.json)
    return 0


def _without_first(model: Any, state: bytes, computed_at: int, count: int) -> bytes:
    """A kept cache less its first ``count`` tokens: loaded into the scratch sequence's place in an empty sequence,
    cut there, and written again."""
    import llama_cpp

    from backends.llamacpp.native import SCRATCH

    assert model.restore_sequence(SCRATCH, state)
    llama_cpp.llama_memory_seq_rm(model.memory, SCRATCH, computed_at, computed_at + count)
    try:
        return bytes(model.sequence_state(SCRATCH))
    finally:
        model.forget(SCRATCH)


if __name__ == "__main__":
    raise SystemExit(main())
