"""The Hardware tab's Benchmark area in a real browser, running the real `hearth bench pipeline` on the model in
use: progress while it runs, the table and chart after, the result kept across a reload; Stop ends the bench and
the workers it started. The bench is sized down through its settings (two rounds of short answers): its figures are
the benchmark's job, the page's plumbing this test's. Both tests use one `hearth ui`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY

pytestmark = pytest.mark.e2e


# One and two answers at once, 16 tokens each: every plan and ratio the page shows, at a quarter of the work.
SMALL = {"HEARTH_BENCH__USERS": "1,2", "HEARTH_BENCH__MAX_TOKENS": "16"}


def _open_bench(page: Any) -> None:
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    page.get_by_role("tab", name="Hardware").click()
    page.get_by_text("Benchmark: this machine alone against the split").click()


def test_the_benchmark_runs_from_the_page_and_its_result_stays(
    shared_app: Callable[..., RunningApp],
    open_page: Callable[[RunningApp], Any],
    embedded_model: Path,
    artifacts_dir: Path,
) -> None:
    app = shared_app("--model", str(embedded_model), settings=SMALL)
    page = open_page(app)
    _open_bench(page)
    page.locator("#bench-result", has_text="No benchmark yet").wait_for(timeout=30_000)
    page.click("#bench-run")
    page.locator("#bench-progress", has_text=" s").wait_for(timeout=60_000)  # "loading: one process… 3 s"
    expect(page.locator("#bench-stop button, button#bench-stop")).to_be_enabled(timeout=10_000)
    page.locator("#bench-progress", has_text="Done in").wait_for(timeout=300_000)
    table = page.inner_text("#bench-result")
    for plan in ("one process", "split (Hearth)", "split (llama.cpp RPC, direct)"):
        assert plan in table
    assert "split / one process, 1 user:" in table and "Energy:" in table
    expect(page.locator("#bench-chart img")).to_be_visible(timeout=10_000)
    page.screenshot(path=str(artifacts_dir / "bench-area.png"), full_page=True)
    (kept,) = (app.home / "benchmarks").glob("pipeline-*.json")
    measured = json.loads(kept.read_text())
    assert measured["max_tokens"] == 16 and {row["users"] for row in measured["rows"]} == {1, 2}  # as set

    page.reload()
    _open_bench(page)
    page.locator("#bench-result", has_text="split (Hearth)").wait_for(timeout=30_000)  # kept


def test_stop_ends_the_benchmark_and_its_workers(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], embedded_model: Path
) -> None:
    app = shared_app("--model", str(embedded_model), settings=SMALL)
    page = open_page(app)
    _open_bench(page)
    page.click("#bench-run")
    page.locator("#bench-progress", has_text="loading").wait_for(timeout=60_000)
    server = psutil.Process(app.process.pid)
    started = [p for p in server.children(recursive=True) if "bench" in " ".join(p.cmdline())]
    assert started, "the benchmark runs in a process of its own"
    workers = [child for bench in started for child in bench.children(recursive=True)]  # its workers, its engines
    page.click("#bench-stop")
    page.locator("#bench-progress", has_text="Stopped.").wait_for(timeout=60_000)
    _, alive = psutil.wait_procs(started + workers, timeout=30)
    left = [" ".join(p.cmdline()) for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    assert not left
