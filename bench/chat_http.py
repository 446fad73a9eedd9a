"""Time-to-first-token and decode speed through the running web app, beside raw llama-cpp-python, in one run.

Starts `hearth ui` on a free port with a throwaway data folder and asks it questions over Gradio's plain HTTP
API (the same streaming handler the page uses, read as server-sent events); asks raw llama-cpp-python the same
questions in this process, alternating. Both are timed from outside: submit -> first answer text, and answer
tokens per second after that (the page's own token count from its stats line; raw: the model's tokenizer).
Greedy decoding, no repeat penalty. Each round's app/raw ratio is against the raw answer of the same round; the
ratios' spread is printed with the medians. The page's `send` inputs are matched by parameter name (read from
Gradio's API description), so a new input on the page does not break the benchmark.

    .venv/bin/python bench/chat_http.py --runs 5 --max-tokens 128
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.bench import QUESTIONS, SYSTEM, open_raw_llama, progress, raw_pieces
from app.bench_stats import format_spread, noise_warning, paired_ratios, spread

STATS_TOKENS = re.compile(r"· (\d+) tokens")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answer_content(chat: Any) -> str:
    """The last answer as the page shows it (text, then the stats line once it has finished). An output the
    handler left unchanged arrives as an update object, not a chat."""
    if isinstance(chat, dict):
        chat = chat.get("value")
    if not isinstance(chat, list) or not chat or chat[-1].get("role") != "assistant":
        return ""
    content = chat[-1]["content"]
    parts = content if isinstance(content, list) else [{"text": content}]
    return "".join(str(part.get("text", "")) for part in parts if isinstance(part, dict)).strip()


def answer_text(content: str) -> str:
    text = content.split("\n\n*")[0]  # drop the stats line the page adds at the end
    return "" if text == "…" else text


def send_inputs(client: Any, values: dict[str, Any]) -> list[Any]:
    """The `send` endpoint's inputs in its own order, by parameter name; unknown ones get their default."""
    info = client.get("/gradio_api/info").json()
    endpoint = info.get("named_endpoints", {}).get("/send")
    if endpoint is None:
        raise SystemExit("the page has no `send` endpoint any more; update bench/chat_http.py to its new name")
    data = []
    for parameter in endpoint["parameters"]:
        name = parameter.get("parameter_name", "")
        if name in values:
            data.append(values[name])
        elif parameter.get("parameter_has_default"):
            data.append(parameter.get("parameter_default"))
        else:
            data.append(None)
    return data


class PageError(Exception):
    """The page answered a call with an error (a model still loading says so this way)."""


def call(client: Any, api: str, data: list[Any]) -> Iterator[Any]:
    """Gradio's plain HTTP API: POST the inputs, then read the server-sent events of the result."""
    reply = client.post(f"/gradio_api/call/{api}", json={"data": data}).json()
    if "event_id" not in reply:
        raise SystemExit(f"the page refused the `{api}` call: {reply}")
    with client.stream("GET", f"/gradio_api/call/{api}/{reply['event_id']}") as events:
        lines = events.iter_lines()
        for line in lines:
            if line.startswith("event: error"):
                raise PageError(f"the page's `{api}` call failed: {next(lines, '')}")
            if line.startswith("data:") and line[5:].strip() not in ("", "null"):
                yield json.loads(line[5:])


def warm_up(client: Any, deadline_s: float = 600) -> None:
    """The page's first answer, once its model has loaded (until then it answers with an error)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            via_app(client, "Hello", 16)
            return
        except PageError:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)


def via_app(client: Any, question: str, max_tokens: int) -> tuple[float, float, str, int | None]:
    """Seconds to the first answer text, seconds after it, the answer, and the page's token count."""
    data = send_inputs(
        client,
        {"text": question, "system_prompt": SYSTEM, "temperature": 0.0, "max_new_tokens": max_tokens},
    )
    started = time.perf_counter()
    first: float | None = None
    content = ""
    for update in call(client, "send", data):
        now = answer_content(update[0])
        if answer_text(now):
            content = now
            first = first or time.perf_counter()
    ended = time.perf_counter()
    counted = STATS_TOKENS.search(content)
    return (
        (first or ended) - started,
        ended - (first or ended),
        answer_text(content),
        (int(counted.group(1)) if counted else None),
    )


def via_raw(llm: Any, question: str, max_tokens: int) -> tuple[float, float, str, int | None]:
    started = time.perf_counter()
    first: float | None = None
    pieces = []
    for piece in raw_pieces(llm, question, max_tokens):
        if piece and first is None:
            first = time.perf_counter()
        pieces.append(piece)
    ended = time.perf_counter()
    return (first or ended) - started, ended - (first or ended), "".join(pieces), None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--model", type=Path, help="GGUF file (default: the embedded SmolLM2-135M)")
    args = parser.parse_args()
    if args.runs < 1 or args.max_tokens < 16:
        parser.error("--runs must be at least 1 and --max-tokens at least 16 (the page's own lowest answer length)")

    import httpx

    from backends.hardware import probe
    from models.embedded import embedded_chat_model

    threads = probe().physical_cores
    model = args.model or embedded_chat_model()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as home:
        env = os.environ | {
            "HEARTH_HOME": home,
            "HEARTH_GENERATION__REPEAT_PENALTY": "1.0",
            "HEARTH_BACKEND__THREADS": str(threads),
        }
        progress(f"starting hearth ui on port {port} with {model.name}")
        server = subprocess.Popen(
            [sys.executable, "-m", "app", "ui", "--port", str(port), "--model", str(model), "--backend", "llamacpp"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parent.parent,
        )
        try:
            assert server.stdout is not None
            seen = []
            entry = ""
            for line in server.stdout:
                seen.append(line)
                if "Hearth is running at" in line:
                    entry = line.split("Hearth is running at", 1)[1].split()[0]
                    break
            else:
                raise SystemExit("hearth ui did not start:\n" + "".join(seen[-20:]))
            client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300)
            client.get(entry)  # the page secret's cookie, as the owner's browser gets it
            progress("opening raw llama-cpp-python on the same file")
            raw = open_raw_llama(model, 4096, threads)
            progress("warming up both sides (the page's first answer also waits for the model to load)")
            warm_up(client)
            via_raw(raw, "Hello", 16)
            rows: dict[str, list[tuple[float, float]]] = {"raw": [], "app": []}
            for index in range(args.runs):
                question = QUESTIONS[index % len(QUESTIONS)]
                for side, run in (
                    ("raw", lambda q=question: via_raw(raw, q, args.max_tokens)),
                    ("app", lambda q=question: via_app(client, q, args.max_tokens)),
                ):
                    progress(
                        f"run {index + 1} of {args.runs}: {'raw llama-cpp-python' if side == 'raw' else 'web app'}…"
                    )
                    ttft, decode_s, text, counted = run()
                    tokens = counted or len(raw.tokenize(text.encode(), add_bos=False, special=False))
                    rows[side].append((ttft * 1000, (tokens - 1) / decode_s if decode_s > 0 else 0.0))
            progress("timing bare Gradio round trips")
            round_trips = []
            for _ in range(args.runs):
                started = time.perf_counter()
                list(call(client, "on_tick", []))
                round_trips.append((time.perf_counter() - started) * 1000)
            raw.close()
        finally:
            server.terminate()
            server.wait(timeout=15)

    print(f"{model.name}, {threads} threads, greedy, up to {args.max_tokens} tokens, {args.runs} runs")
    print(f"{'median':<26}{'llama-cpp-python':>18}{'Hearth web app':>16}{'app/raw':>10}")
    warnings = []
    spreads = []
    for column, label in ((0, "time to first token (ms)"), (1, "decode tokens/s")):
        raw_values = [r[column] for r in rows["raw"]]
        app_values = [r[column] for r in rows["app"]]
        raw_value, app_value = statistics.median(raw_values), statistics.median(app_values)
        paired = paired_ratios(app_values, raw_values)
        ratio = spread(paired).median if paired else 0.0  # the median of each round's own ratio
        print(f"{label:<26}{raw_value:>18.1f}{app_value:>16.1f}{ratio:>10.2f}")
        if paired:
            value = spread(paired)
            spreads.append(f"  {label:<26}{format_spread(value)}")
            warning = noise_warning(value, f"the {label} ratio")
            if warning:
                warnings.append(warning)
    print("app/raw per run, each against the raw answer of the same round:")
    print("\n".join(spreads + warnings))
    print(f"for scale: one Gradio request with no model work takes {statistics.median(round_trips):.0f} ms here")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except PageError as exc:
        raise SystemExit(f"error: {exc}") from None
