"""Passages read once, measured at the engine before the scheduler uses it: the time to the first
word of an answer from documents when the passages' caches, kept from an earlier question, are joined into the
sequence instead of read, against reading the whole prompt, with raw llama-cpp-python reading the same tokens in
the same run; and whether the greedy answer stays the same.

The prompt is Hearth's own for a question from documents (its system prompt and its passage layout,
``rag.prompt``), rendered by the model's chat template and cut at the passages
(``backends.llamacpp.caches.prompt_spans``).
Eight sections of a held-out text (the Apache License 2.0) are the passages. First they are read three to a prompt,
as earlier questions would read them, and each one's cache is kept; then each of eight questions (written for
this bench, about one section each) gets its own section and two others, none of them after the passages they were
read after and each at another position (llama.cpp turns their keys for the new places). A kept cache also carries
what was read before it where it was computed: that is what joining approximates, and what reading a share of each
passage again (``--recompute``, as CacheBlend recomputes a share; Hearth's ``passage_recompute``) corrects.

For each question, alternating the order between runs:

- read: the sequence holds the system prompt (as a slot keeps it between questions) and the rest is read in
  512-token pieces, as the engine does;
- joined, once per share of ``--recompute``: the same start, then each passage's glue and its first tokens (the
  share) read, the rest of its kept cache joined, then the question read;
- raw: llama-cpp-python's ``Llama`` reads the whole prompt's tokens and writes one.

With ``--packed``, each share is also joined from caches kept at 8 bits (``backends.llamacpp.caches.kept_state``, as the
passage store holds them by default), unpacked inside the timed part as the store does; its rows are named
``SHARE q8_0``. With ``--slots N`` (more than one), the context has a KV stream per slot and a kept cache is joined
as bytes (``backends.llamacpp.caches.stream_join``), as the engine does with its default four slots.

This is the set the share is chosen on (tuning); answers are judged on the Debian sets (``hearth eval answers``).

    .venv/bin/python bench/passage_join.py --model PATH.gguf --runs 2 --recompute 0,0.1,0.2 \
        --json bench/data/passage-join.NAME.json
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
    "What may a contributor's copyright license let me do with the Work?",
    "When does the patent license granted to a contributor end?",
    "What must a redistribution of the Work include?",
    "Under which terms is a contribution I send to the Licensor accepted?",
    "What does the license say about using the Licensor's trade names and trademarks?",
    "Is the Work provided with any warranty?",
    "Can I sue a contributor for damages the Work caused me?",
    "May I charge for support or a warranty when I redistribute the Work?",
]
PASSAGE_MARKERS = (
    "2. Grant of Copyright License.",
    "3. Grant of Patent License.",
    "4. Redistribution.",
    "5. Submission of Contributions.",
    "6. Trademarks.",
    "7. Disclaimer of Warranty.",
    "8. Limitation of Liability.",
    "9. Accepting Warranty or Additional Liability.",
)
PER_PROMPT = 3


def passages() -> list[str]:
    """The sections of the license the questions are about, each cut to about a passage's length."""
    text = TEXT.read_text(encoding="utf-8")
    found = []
    for marker in PASSAGE_MARKERS:
        start = text.index(marker)
        found.append(" ".join(text[start : start + 900].split()))
    return found


def reading_order() -> list[list[int]]:
    """The prompts that first read the sections, three at a time in order (the last one wrapping around)."""
    count = len(PASSAGE_MARKERS)
    return [[(first + i) % count for i in range(PER_PROMPT)] for first in range(0, count, PER_PROMPT)]


def asking_order(question: int) -> list[int]:
    """The sections a question gets: its own and the ones three and six after it, turned so that its own stands
    first, second or third in turn (none after what it was first read after)."""
    count = len(PASSAGE_MARKERS)
    chosen = [(question + 3 * i) % count for i in range(PER_PROMPT)]
    turn = question % PER_PROMPT
    return chosen[turn:] + chosen[:turn]


def _shares(text: str) -> list[float]:
    shares = [float(part) for part in text.split(",") if part.strip()]
    if not shares or any(not 0 <= share < 1 for share in shares):
        raise argparse.ArgumentTypeError(f"shares from 0 to below 1, comma-separated (got {text!r})")
    return shares


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
    parser.add_argument(
        "--recompute",
        type=_shares,
        default=[0.0],
        help="shares of each passage's first tokens read again, comma-separated: each a joined way (default 0)",
    )
    parser.add_argument("--packed", action="store_true", help="also join each share from caches kept at 8 bits")
    parser.add_argument("--answer-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--slots",
        type=int,
        default=1,
        help="slots of the context (with more than one, each has a KV stream of its own and a kept cache is joined "
        "as bytes: backends/llamacpp/caches/stream_join.py); the bench reads and joins in the first",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from app.bench.chat import open_raw_llama
    from app.bench.stats import report, summarise
    from backends.base import ChatMessage, LoadOptions
    from backends.chat_template import ChatFormatter
    from backends.llamacpp.caches.kept_state import pack, unpack
    from backends.llamacpp.caches.passage_join import recomputed
    from backends.llamacpp.caches.prompt_spans import segments, tokenized
    from backends.llamacpp.log_route import route_llama_logs
    from backends.llamacpp.native import BATCH_TOKENS, NativeModel
    from models.embedded import embedded_chat_model
    from models.gguf import read_model_info
    from rag.prompt import Source, rag_question, rag_system_prompt

    route_llama_logs()
    path = args.model or embedded_chat_model()
    info = read_model_info(path)
    context = 4096
    model = NativeModel(path, LoadOptions(context_length=context, threads=args.threads, slots=args.slots))
    formatter = ChatFormatter(info.chat_template, info.bos_token, info.eos_token)
    reader = Reader(model, BATCH_TOKENS)
    system = rag_system_prompt("")
    texts = passages()

    def prompt_for(question: int, sections: list[int]) -> tuple[list[int], list[Any], list[str]]:
        order = [texts[section] for section in sections]
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
    packed: dict[str, bytes] = {}  # passage -> its cache at 8 bits

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
            packed[text] = pack(kept[text][0])

    def joined(tokens: list[int], spans: list[Any], order: list[str], way: str) -> tuple[float, list[int], int]:
        share, eight_bits = float(way.split()[0]), way.endswith(" q8_0")
        model.forget(0)
        reader.read(tokens[:kept_prefix], 0)
        began = time.perf_counter()
        at, joined_tokens = kept_prefix, 0
        for span, text in zip(spans, order, strict=True):
            state, computed_at = kept[text]
            if eight_bits:
                unpacked = unpack(packed[text])
                assert unpacked is not None and unpacked != state, "a cache at 8 bits must be packed"
                state = unpacked
            fresh = recomputed(len(span), share)
            reader.read(tokens[at : span.start + fresh], at)  # the glue, and the passage's first tokens again
            assert model.join_span(0, state, computed_at, span.start, skip=fresh)
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

    def text(answer: list[int]) -> str:
        return b"".join(model.piece(t) for t in answer).decode(errors="replace")

    shares = [str(share) for share in args.recompute]
    shares += [f"{share} q8_0" for share in shares] if args.packed else []
    rows: list[dict[str, Any]] = []
    try:
        for sections in reading_order():  # the passages as earlier questions read them
            keep(*prompt_for(sections[0], sections))
        for run in range(args.runs):
            for question in range(len(QUESTIONS)):
                tokens, spans, order = prompt_for(question, asking_order(question))
                ways = ["read", *shares, "raw"]
                ways = ways if run % 2 == 0 else ways[::-1]
                row: dict[str, Any] = {"run": run, "question": QUESTIONS[question], "prompt_tokens": len(tokens)}
                row["joined"] = {}
                for way in ways:
                    if way == "read":
                        seconds, answer = read_whole(tokens)
                        row |= {"read_ms": seconds * 1000, "read_text": text(answer)}
                    elif way == "raw":
                        row["raw_ms"] = raw_ms(tokens)
                    else:
                        seconds, answer, from_cache = joined(tokens, spans, order, way)
                        row["joined"][str(way)] = {"ms": seconds * 1000, "text": text(answer), "from_cache": from_cache}
                for name, joined_way in row["joined"].items():
                    joined_way["same_answer"] = joined_way["text"] == row["read_text"]
                    if name.endswith(" q8_0"):
                        joined_way["same_as_f16"] = joined_way["text"] == row["joined"][name.split()[0]]["text"]
                rows.append(row)
                print(
                    f"run {run + 1} q{question}: read {row['read_ms']:.0f} ms, raw {row['raw_ms']:.0f} ms, joined "
                    + ", ".join(
                        f"{share}: {way['ms']:.0f} ms{'' if way['same_answer'] else ' (other answer)'}"
                        for share, way in row["joined"].items()
                    ),
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
        "slots": args.slots,
        "ms": {way: summarise([r[f"{way}_ms"] for r in rows]) for way in ("read", "raw")},
        "ratios": {"read / raw": summarise([r["read_ms"] / r["raw_ms"] for r in rows])},
        "recompute": {share: _share_figures(rows, share) for share in shares},
        "rows": rows,
    }
    report(result, args.json)
    return 0


def _share_figures(rows: list[dict[str, Any]], share: str) -> dict[str, Any]:
    """One share's times against reading and raw, the passage tokens joined, and the answers that stayed the same
    (each question's answer is the same in every run: greedy on the same tokens)."""
    from app.bench.stats import summarise

    ways = [row["joined"][share] for row in rows]
    first_run = [row["joined"][share]["same_answer"] for row in rows if row["run"] == 0]
    return {
        "ms": summarise([way["ms"] for way in ways]),
        "joined / read": summarise([way["ms"] / row["read_ms"] for way, row in zip(ways, rows, strict=True)]),
        "joined / raw": summarise([way["ms"] / row["raw_ms"] for way, row in zip(ways, rows, strict=True)]),
        "passage tokens joined": summarise([float(way["from_cache"]) for way in ways]),
        "same answer": f"{sum(first_run)} of {len(first_run)}",
    } | _as_f16(rows, share)


def _as_f16(rows: list[dict[str, Any]], share: str) -> dict[str, Any]:
    """For caches kept at 8 bits, the answers that stayed those of the same share joined from f16 caches."""
    if not share.endswith(" q8_0"):
        return {}
    same = [row["joined"][share]["same_as_f16"] for row in rows if row["run"] == 0]
    return {"same answer as f16": f"{sum(same)} of {len(same)}"}


if __name__ == "__main__":
    raise SystemExit(main())
