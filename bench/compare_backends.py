"""The same model on llama.cpp (CPU) and OpenVINO (CPU), in one run: time to first token and decode tokens/s.

Both backends load the same GGUF (the embedded SmolLM2 unless --model) and answer the same questions greedily,
interleaved (llama.cpp, OpenVINO, llama.cpp, …) so drift on a shared machine hits both alike. Each answer's
timings come from the backend's own Usage event (tokens counted with the model's tokenizer). Medians.

    .venv/bin/python bench/compare_backends.py --runs 7 --max-tokens 128
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--model", type=Path, help="GGUF file (default: the embedded SmolLM2-135M)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    args = parser.parse_args()

    from app.bench.chat import QUESTIONS, SYSTEM
    from backends.base import Backend, CancelToken, ChatMessage, GenerationParams, LoadOptions, Usage
    from backends.hardware import probe
    from backends.llamacpp.backend import LlamaCppBackend
    from backends.openvino.backend import OpenVinoBackend
    from models.embedded import embedded_chat_model
    from models.gguf import read_model_info

    model = read_model_info(args.model or embedded_chat_model())
    threads = args.threads or probe().physical_cores
    params = GenerationParams(temperature=0.0, max_new_tokens=args.max_tokens)
    results: dict[str, list[Usage]] = {"llama.cpp": [], "OpenVINO": []}
    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as cache:
        backends: dict[str, Backend] = {"llama.cpp": LlamaCppBackend(), "OpenVINO": OpenVinoBackend()}
        for backend in backends.values():
            for _ in backend.load(model, LoadOptions(4096, threads, device="CPU", cache_dir=cache)):
                pass
        try:
            for backend in backends.values():  # one warm-up answer each, not counted
                list(backend.stream_chat([ChatMessage("user", "Hello")], GenerationParams(0.0, 8), CancelToken()))
            for index in range(args.runs):
                messages = [ChatMessage("system", SYSTEM), ChatMessage("user", QUESTIONS[index % len(QUESTIONS)])]
                for name, backend in backends.items():
                    events = list(backend.stream_chat(messages, params, CancelToken()))
                    results[name].append(next(e for e in events if isinstance(e, Usage)))
        finally:
            for backend in backends.values():
                backend.close()

    def median(name: str, field: str) -> float:
        return float(statistics.median(getattr(u, field) for u in results[name]))

    print(f"{model.display_name}, {threads} threads, greedy, up to {args.max_tokens} tokens, {args.runs} questions")
    print(f"{'median':<26}{'llama.cpp CPU':>15}{'OpenVINO CPU':>15}{'OpenVINO/llama.cpp':>20}")
    for field, label in (
        ("time_to_first_token_ms", "time to first token ms"),
        ("decode_tokens_per_s", "decode tokens/s"),
        ("completion_tokens", "tokens per answer"),
        ("prompt_tokens", "prompt tokens"),
    ):
        left, right = median("llama.cpp", field), median("OpenVINO", field)
        print(f"{label:<26}{left:>15.1f}{right:>15.1f}{right / left if left else 0:>20.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
