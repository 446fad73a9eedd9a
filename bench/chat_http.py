"""Time-to-first-token and decode speed through the running web app, beside raw llama-cpp-python, in one run.

Starts `hearth ui` on a free port with a throwaway data folder and asks it questions over Gradio's plain HTTP
API (the same streaming handler the page uses, read as server-sent events); asks raw llama-cpp-python the same
questions in this process, alternating. Both are timed from outside: submit -> first answer text, and answer
tokens (counted with the model's own tokenizer) per second after that. Greedy decoding, no repeat penalty.

    .venv/bin/python bench/chat_http.py --runs 5 --max-tokens 128
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.bench import QUESTIONS, SYSTEM, open_raw_llama, raw_pieces


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answer_text(chat: list[dict[str, Any]]) -> str:
    if not chat or chat[-1]["role"] != "assistant":
        return ""
    content = chat[-1]["content"]
    parts = content if isinstance(content, list) else [{"text": content}]
    text = "".join(str(part.get("text", "")) for part in parts if isinstance(part, dict))
    text = text.split("\n\n*")[0]  # drop the stats line the page adds at the end
    return "" if text == "…" else text


def call(client: Any, api: str, data: list[Any]) -> Iterator[Any]:
    """Gradio's plain HTTP API: POST the inputs, then read the server-sent events of the result."""
    event_id = client.post(f"/gradio_api/call/{api}", json={"data": data}).json()["event_id"]
    with client.stream("GET", f"/gradio_api/call/{api}/{event_id}") as events:
        for line in events.iter_lines():
            if line.startswith("data:") and line[5:].strip() not in ("", "null"):
                yield json.loads(line[5:])


def via_app(client: Any, question: str, max_tokens: int) -> tuple[float, float, str]:
    started = time.perf_counter()
    first: float | None = None
    final = ""
    for update in call(client, "send", [question, SYSTEM, 0.0, max_tokens]):
        text = answer_text(update[0])
        if text:
            final = text
            first = first or time.perf_counter()
    ended = time.perf_counter()
    return (first or ended) - started, ended - (first or ended), final


def via_raw(llm: Any, question: str, max_tokens: int) -> tuple[float, float, str]:
    started = time.perf_counter()
    first: float | None = None
    pieces = []
    for piece in raw_pieces(llm, question, max_tokens):
        if piece and first is None:
            first = time.perf_counter()
        pieces.append(piece)
    ended = time.perf_counter()
    return (first or ended) - started, ended - (first or ended), "".join(pieces)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()

    import httpx

    from backends.hardware import probe
    from models.embedded import embedded_chat_model

    threads = probe().physical_cores
    model = embedded_chat_model()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as home:
        env = os.environ | {
            "HEARTH_HOME": home,
            "HEARTH_GENERATION__REPEAT_PENALTY": "1.0",
            "HEARTH_BACKEND__THREADS": str(threads),
        }
        server = subprocess.Popen(
            [sys.executable, "-m", "app", "ui", "--port", str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parent.parent,
        )
        try:
            assert server.stdout is not None
            for line in server.stdout:
                if "Hearth is running at" in line:
                    break
            client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
            raw = open_raw_llama(model, 4096, threads)
            via_app(client, "Hello", 16)
            via_raw(raw, "Hello", 16)
            rows: dict[str, list[tuple[float, float]]] = {"raw": [], "app": []}
            for index in range(args.runs):
                question = QUESTIONS[index % len(QUESTIONS)]
                for side, run in (
                    ("raw", lambda q=question: via_raw(raw, q, args.max_tokens)),
                    ("app", lambda q=question: via_app(client, q, args.max_tokens)),
                ):
                    ttft, decode_s, text = run()
                    tokens = len(raw.tokenize(text.encode(), add_bos=False, special=False))
                    rows[side].append((ttft * 1000, (tokens - 1) / decode_s if decode_s > 0 else 0.0))
            round_trips = []
            for _ in range(args.runs):
                started = time.perf_counter()
                list(call(client, "on_tick", []))
                round_trips.append((time.perf_counter() - started) * 1000)
            raw.close()
        finally:
            server.terminate()
            server.wait(timeout=15)

    print(f"SmolLM2-135M-Instruct Q4_1, {threads} threads, greedy, up to {args.max_tokens} tokens, {args.runs} runs")
    print(f"{'median':<26}{'llama-cpp-python':>18}{'Hearth web app':>16}{'app/raw':>10}")
    for column, label in ((0, "time to first token (ms)"), (1, "decode tokens/s")):
        raw_value = statistics.median(r[column] for r in rows["raw"])
        app_value = statistics.median(r[column] for r in rows["app"])
        print(f"{label:<26}{raw_value:>18.1f}{app_value:>16.1f}{app_value / raw_value:>10.2f}")
    print(f"for scale: one Gradio request with no model work takes {statistics.median(round_trips):.0f} ms here")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
