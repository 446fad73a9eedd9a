"""The Benchmark part of the Hardware tab: `hearth bench pipeline` run from the page on the model in use, one
process against the split over two workers it starts on this machine, with its progress while it runs, the table
and the chart after, and Stop. Results are kept in the data folder (``benchmarks/``), so the last one shows again
after a restart. Wiring and the child process only; the table comes from ``app.ui.bench_view``."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from app.ui.bench_view import progress_text, summary_html

STOP_GRACE_S = 15.0
NOTHING_YET = "No benchmark yet. **Measure** runs one on the model in use (a few minutes for a small model)."


@dataclass
class BenchUi:
    run: Any
    stop: Any
    progress: Any
    result: Any
    chart: Any


def build_bench_section() -> BenchUi:
    with gr.Accordion("Benchmark: this machine alone against the split", open=False, elem_id="bench-area"):
        gr.Markdown(
            "Measures the model in use on this machine alone and split over two workers that the benchmark starts "
            "here (1 thread each): tokens per second for 1, 2, 4 and 8 users at once, time per token, first token, "
            "load time, bytes per token over the links, and energy where the machine reports it."
        )
        with gr.Row():
            run = gr.Button("Measure", elem_id="bench-run", scale=0, min_width=140)
            stop = gr.Button("Stop", elem_id="bench-stop", scale=0, min_width=120, interactive=False)
        progress = gr.Markdown("", elem_id="bench-progress")
        result = gr.HTML("", elem_id="bench-result")
        chart = gr.Image(label="Tokens per second by users at once", type="pil", visible=False, elem_id="bench-chart")
    return BenchUi(run, stop, progress, result, chart)


class BenchPanel:
    def __init__(self, folder: Path, model_path: Callable[[], Path], users: str = "1,2,4,8", tokens: int = 64) -> None:
        self._folder = folder
        self._model_path = model_path
        self._size = ("--users", users, "--max-tokens", str(tokens))  # the bench.* settings
        self._process: subprocess.Popen[str] | None = None
        self._stop_asked = False
        self._lock = threading.Lock()

    def latest(self) -> tuple[str, Any]:
        """The last result kept, or what to do when there is none."""
        found = sorted(self._folder.glob("pipeline-*.json")) if self._folder.is_dir() else []
        if not found:
            return NOTHING_YET, gr.update(visible=False)
        return self._shown(found[-1])

    def _shown(self, result: Path) -> tuple[str, Any]:
        try:
            summary = json.loads(result.read_text())
        except (OSError, ValueError):
            return "The last benchmark's results cannot be read; run it again.", gr.update(visible=False)
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(result.stat().st_mtime))
        chart = result.with_suffix(".png")
        image = _image(chart) if chart.is_file() else None
        return summary_html(summary, when), gr.update(value=image, visible=image is not None)

    def run(self) -> Iterator[tuple[Any, ...]]:
        """Progress while the bench runs (with Stop on), then its table and chart."""
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                yield "A benchmark is already running.", gr.update(), gr.update(), gr.update(), gr.update()
                return
            self._folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            stem = self._folder / f"pipeline-{time.strftime('%Y%m%d-%H%M%S')}"
            command = [
                *(sys.executable, "-m", "app", "bench", "pipeline", "--runs", "1", *self._size),
                *("--model", str(self._model_path()), "--json", f"{stem}.json", "--chart", f"{stem}.png"),
            ]
            process = subprocess.Popen(
                command,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=os.environ.copy(),
                start_new_session=True,  # its own group: Stop reaches the workers and engines it started too
            )
            self._process = process
            self._stop_asked = False
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_read_lines, args=(process, lines), daemon=True).start()
        started, last = time.monotonic(), "Starting"
        other: list[str] = []
        busy = (gr.update(interactive=False), gr.update(interactive=True))
        while True:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                if process.poll() is not None:
                    break  # ended; a child of it that lives on may hold the pipe open
                line = ""
            if line is None:
                break
            if line.startswith("bench: "):
                last = line
            elif line.strip():
                other = [*other[-5:], line.strip()]
            yield progress_text(last, time.monotonic() - started), gr.update(), gr.update(), *busy
        code = process.wait()
        idle = (gr.update(interactive=True), gr.update(interactive=False))
        with self._lock:
            self._process = None
            stopped = self._stop_asked
        if code != 0 or not Path(f"{stem}.json").is_file():
            told = "Stopped." if stopped else "The benchmark failed: " + (" ".join(other[-2:]) or f"status {code}")
            yield told, gr.update(), gr.update(), *idle
            return
        table, chart = self._shown(Path(f"{stem}.json"))
        yield f"Done in {time.monotonic() - started:.0f} s.", table, chart, *idle

    def stop(self) -> str:
        with self._lock:
            process = self._process
            if process is None or process.poll() is not None:
                return "No benchmark is running."
            self._stop_asked = True
        threading.Thread(target=_stop_group, args=(process,), name="bench-stop", daemon=True).start()
        return "Stopping…"


def _stop_group(process: subprocess.Popen[str]) -> None:
    """Ctrl+C to the bench and everything it started (the bench ends its workers on the way out); whatever is
    still there after a while is killed."""
    for sent, wait_s in ((signal.SIGINT, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sent)
        try:
            process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # the bench is gone; anything of its group left goes too
        return


def _read_lines(process: subprocess.Popen[str], into: queue.Queue[str | None]) -> None:
    assert process.stderr is not None
    for line in process.stderr:
        into.put(line.rstrip("\n"))
    into.put(None)


def _image(path: Path) -> Any:
    from PIL import Image

    with Image.open(path) as opened:
        return opened.copy()


def wire_bench_section(panel: BenchPanel, ui: BenchUi, tab: Any) -> None:
    tab.select(panel.latest, outputs=[ui.result, ui.chart], queue=False)
    ui.run.click(panel.run, outputs=[ui.progress, ui.result, ui.chart, ui.run, ui.stop], concurrency_id="bench")
    ui.stop.click(panel.stop, outputs=[ui.progress], queue=False)
