"""Aggregate decode speed of parallel answers: Hearth's llama.cpp backend writing 1, 2 and 4 answers at once,
against single-stream raw llama-cpp-python, in one run on the same model.

The same four questions are answered greedily in every configuration: one at a time, two at a time, all four
at once (Hearth), and one at a time through a bare ``llama_cpp.Llama`` token loop on the same prompt tokens
(raw). A configuration's rate is the decode tokens it wrote (each answer's tokens after its first, which pays
for the prompt) over the time from its first answer's first token to its last answer's end. For scale, the
bare ``llama_decode`` loop (no sampling, no text, no threads) is timed at the same widths: how much batching
itself gives on this machine, whatever the scheduler does. Rounds interleave all configurations so drift on a
shared machine hits each alike; medians over rounds. Ratios are against Hearth's one stream and against raw.

llama.cpp's OpenMP threads spin while they wait unless ``OMP_WAIT_POLICY=passive`` is set before the process
starts; the header says which was in effect.

    .venv/bin/python bench/parallel_decode.py --runs 3 --max-tokens 128
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

STREAMS = (1, 2, 4)


def hearth_round(backend: Any, prompts: list[list[Any]], width: int, max_tokens: int) -> tuple[int, float, list[int]]:
    """Answer ``prompts`` ``width`` at a time; returns (decode tokens, decode seconds, tokens per answer)."""
    tokens, seconds, lengths = 0, 0.0, []
    for start in range(0, len(prompts), width):
        group = prompts[start : start + width]
        spans: list[tuple[float, float, int]] = []
        gate = threading.Barrier(len(group))
        threads = [threading.Thread(target=_answer, args=(backend, m, max_tokens, gate, spans)) for m in group]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        tokens += sum(max(count - 1, 0) for _, _, count in spans)
        seconds += max(end for _, end, _ in spans) - min(first for first, _, _ in spans)
        lengths += [count for _, _, count in spans]
    return tokens, seconds, lengths


def _answer(
    backend: Any, messages: list[Any], max_tokens: int, gate: threading.Barrier, spans: list[tuple[float, float, int]]
) -> None:
    """One answer on its own thread; appends (first token, end, completion tokens), times absolute."""
    from backends.base import CancelToken, GenerationParams, Usage

    params = GenerationParams(temperature=0.0, max_new_tokens=max_tokens, repeat_penalty=1.0)
    gate.wait()
    began = time.perf_counter()
    events = list(backend.stream_chat(messages, params, CancelToken()))
    usage = next(e for e in events if isinstance(e, Usage))
    spans.append((began + usage.time_to_first_token_ms / 1000, began + usage.total_ms / 1000, usage.completion_tokens))


def raw_round(llm: Any, prompts: list[list[int]], max_tokens: int) -> tuple[int, float, list[int]]:
    """llama-cpp-python's own token loop, one answer at a time, greedy, on the same prompt tokens."""
    import llama_cpp

    tokens, seconds, lengths = 0, 0.0, []
    vocab = llm._model.vocab
    for prompt in prompts:
        first: float | None = None
        count = 0
        for token in llm.generate(prompt, temp=0.0, repeat_penalty=1.0):
            first = first or time.perf_counter()
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                break
            count += 1
            if count >= max_tokens:
                break
        assert first is not None
        seconds += time.perf_counter() - first
        tokens += max(count - 1, 0)
        lengths.append(count)
    return tokens, seconds, lengths


def bare_round(engine: Any, prompts: list[list[int]], width: int, steps: int) -> tuple[int, float]:
    """``steps`` llama_decode calls of one token for each of ``width`` sequences, after their prompts."""
    from backends.llamacpp.native import TokenBatch

    batch = TokenBatch(512)
    try:
        for sequence in range(width):
            engine.forget(sequence)
            batch.clear()
            prompt = prompts[sequence]
            for position, token in enumerate(prompt):
                batch.add(token, position, sequence, logits=position == len(prompt) - 1)
            engine.decode(batch)
        started = time.perf_counter()
        for step in range(steps):
            batch.clear()
            for sequence in range(width):
                batch.add(prompts[sequence][-1], len(prompts[sequence]) + step, sequence, logits=True)
            if engine.decode(batch) != 0:
                raise RuntimeError("llama_decode failed")
        return width * steps, time.perf_counter() - started
    finally:
        batch.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--context", type=int, default=1024, help="tokens per answer (default 1024)")
    parser.add_argument("--model", type=Path, help="GGUF file (default: the embedded SmolLM2-135M)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    args = parser.parse_args()

    from app.bench.chat import QUESTIONS, SYSTEM, open_raw_llama
    from backends.base import CancelToken, ChatMessage, GenerationParams, LoadOptions
    from backends.chat_template import build_formatter
    from backends.hardware import probe
    from backends.llamacpp.backend import LlamaCppBackend
    from backends.llamacpp.native import NativeModel
    from models.embedded import embedded_chat_model
    from models.gguf import read_model_info

    model = read_model_info(args.model or embedded_chat_model())
    threads = args.threads or probe().physical_cores
    chats = [[ChatMessage("system", SYSTEM), ChatMessage("user", question)] for question in QUESTIONS[:4]]
    formatter = build_formatter(model.chat_template, model.bos_token, model.eos_token)

    options = LoadOptions(args.context, threads, slots=max(STREAMS))
    backend = LlamaCppBackend()
    for _ in backend.load(model, options):
        pass
    raw = open_raw_llama(model.path, args.context, threads)
    bare = NativeModel(model.path, options)
    try:
        raw_prompts = [raw.tokenize(formatter.render(chat).encode(), add_bos=False, special=True) for chat in chats]
        list(backend.stream_chat(chats[0], GenerationParams(0.0, 8), CancelToken()))  # warm-up, not counted
        raw_round(raw, raw_prompts[:1], 8)
        rates: dict[str, list[float]] = {"raw": []}
        lengths: dict[str, list[int]] = {}
        for _ in range(args.runs):
            tokens, seconds, lengths["raw"] = raw_round(raw, raw_prompts, args.max_tokens)
            rates["raw"].append(tokens / seconds)
            for width in STREAMS:
                tokens, seconds, lengths[str(width)] = hearth_round(backend, chats, width, args.max_tokens)
                rates.setdefault(str(width), []).append(tokens / seconds)
                tokens, seconds = bare_round(bare, raw_prompts, width, args.max_tokens - 1)
                rates.setdefault(f"bare {width}", []).append(tokens / seconds)
    finally:
        bare.close()
        raw.close()
        backend.close()

    median = {name: statistics.median(values) for name, values in rates.items()}
    print(
        f"{model.display_name}, {threads} threads, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, "
        f"greedy, up to {args.max_tokens} tokens per answer, {len(chats)} questions, {args.runs} rounds"
    )
    print(f"{'configuration':<34}{'decode tok/s':>14}{'x 1 stream':>12}{'x raw':>8}   tokens per answer")
    rows = [("raw llama-cpp-python, 1 stream", "raw")]
    rows += [(f"Hearth, {n} at once", str(n)) for n in STREAMS]
    rows += [(f"bare llama_decode, {n} at once", f"bare {n}") for n in STREAMS]
    for label, key in rows:
        rate = median[key]
        answered = " ".join(str(n) for n in lengths.get(key, ()))
        print(f"{label:<34}{rate:>14.1f}{rate / median['1']:>12.2f}{rate / median['raw']:>8.2f}   {answered}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
