"""The Documents tab and document chat in a real browser, against a real `hearth ui` (MiniLM, Chroma, llama.cpp)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY, answer_text, send
from tests.helpers import write_bookmarked_pdf

pytestmark = pytest.mark.e2e

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
# Odd characters on purpose: the name is shown as typed and mapped to a safe store name behind the scenes.
COLLECTION = "Coast & Kitchen: notes (2026)"
INGEST_TIMEOUT_MS = 180_000


def open_documents(page: Any) -> None:
    page.get_by_role("tab", name="Documents").click()
    page.wait_for_selector("#new-name textarea, #new-name input", timeout=15_000)


def create_collection(page: Any, name: str, app: RunningApp | None = None) -> None:
    """Create ``name`` and wait for its summary. The first creation in a new app can wait for the document
    services the app is still building beside its model load (Chroma, the reader processes), which on a loaded
    machine takes a while: a generous wait, and if it still never shows, what the page and the app said."""
    box = page.locator("#new-name textarea, #new-name input").first
    box.fill(name)
    expect(box).to_have_value(name)
    page.click("#create-collection")
    try:
        page.wait_for_selector(f"#collection-summary:has-text({name!r})", timeout=90_000)
    except PlaywrightTimeout:
        shown = page.locator("#collection-summary").all_inner_texts()
        toasts = page.locator(".toast-body").all_inner_texts()
        log = app.log.read_text(errors="replace")[-4000:] if app and app.log.exists() else "(no log)"
        raise AssertionError(
            f"collection {name!r} never shown; the summary shows {shown!r}, messages {toasts!r}; the app's log "
            f"ends:\n{log}"
        ) from None


def upload(page: Any, files: list[Path], expect: str) -> str:
    """Upload ``files`` through the file box and wait until the report contains ``expect``."""
    page.set_input_files("#upload input[type=file]", [str(f) for f in files])
    report = page.locator("#ingest-progress")
    report.filter(has_text=expect).wait_for(timeout=INGEST_TIMEOUT_MS)
    return str(report.inner_text())


def press_cancel(page: Any, tries: int = 3) -> None:
    """Press Cancel until the page says it heard it ("Cancelling…", or the report once stopped): a click that
    lands while the line beside it is redrawn is pressed again, as a person would."""
    heard = page.locator("#ingest-progress").filter(has_text=re.compile("Cancelling|Cancelled after"))
    for _ in range(tries):
        if page.locator("#cancel").is_visible():
            page.click("#cancel", timeout=10_000)
        try:
            heard.wait_for(timeout=10_000)
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError(f"Cancel was pressed {tries} times and not heard: {page.inner_text('#ingest-progress')!r}")


def wait_for_report(page: Any, expect: str, app: RunningApp, timeout_ms: int = INGEST_TIMEOUT_MS) -> str:
    """The upload report once it holds ``expect``; if it never does, what the page and the app said instead."""
    report = page.locator("#ingest-progress")
    try:
        report.filter(has_text=expect).wait_for(timeout=timeout_ms)
    except PlaywrightTimeout:
        log = app.log.read_text(errors="replace")[-4000:] if app.log.exists() else "(no log)"
        shown = report.inner_text()
        raise AssertionError(f"no {expect!r}; the page shows {shown!r}; the app's log ends:\n{log}") from None
    return str(report.inner_text())


def table_rows(page: Any) -> dict[str, list[str]]:
    # The rendered rows (the table also keeps a hidden copy of a few rows to size its columns).
    rows = page.locator("#files [role=row][aria-rowindex]:has([role=gridcell])")
    result: dict[str, list[str]] = {}
    for i in range(rows.count()):
        cells = [c.strip() for c in rows.nth(i).locator("[role=gridcell]").all_inner_texts()]
        if cells and cells[0]:
            result[cells[0]] = cells[1:]
    return result


def pick_chat_collection(page: Any, name: str) -> None:
    page.get_by_role("tab", name="Chat").click()
    page.click("#chat-collection input")
    page.get_by_role("option", name=name).click()


def test_upload_ask_and_see_a_cited_source(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], artifacts_dir: Path, tmp_path: Path
) -> None:
    app = shared_app()
    uploads = app.home / "documents"
    earlier = {p for p in uploads.rglob("*") if p.is_file()}  # the module's other tests share the data folder
    page = open_page(app)
    open_documents(page)
    create_collection(page, COLLECTION)

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "empty.txt").write_bytes(b"")
    (bad / "binary.txt").write_bytes(bytes(range(256)) * 64)
    (bad / "slides.pptx").write_bytes(b"PK\x03\x04 not really")
    (bad / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj <<>> garbage")
    good = [CORPUS / "lighthouse-history.md", CORPUS / "tide-tables.pdf", CORPUS / "sourdough.html"]
    report = upload(page, [*good, *sorted(bad.iterdir())], expect="Added 3 files")
    assert report.count("Skipped") == 4, report
    rows = table_rows(page)
    for name in ("lighthouse-history.md", "tide-tables.pdf", "sourdough.html"):
        assert rows[name][0] == "indexed" and int(rows[name][1]) > 0 and rows[name][2] == "uploaded", rows
    for name in ("empty.txt", "binary.txt", "slides.pptx", "broken.pdf"):
        assert rows[name][0].startswith("skipped: "), rows
    assert "empty" in rows["empty.txt"][0]
    assert "not a supported" in rows["slides.pptx"][0] or ".pptx" in rows["slides.pptx"][0]
    added = {p for p in uploads.rglob("*") if p.is_file()} - earlier
    assert sorted(p.name for p in added) == sorted(p.name for p in good)

    # The same file again changes nothing.
    again = upload(page, [CORPUS / "lighthouse-history.md"], expect="Already in this collection")
    assert "lighthouse-history.md" in again
    assert len(table_rows(page)) == 7

    page.wait_for_selector(STATUS_READY, timeout=60_000)
    pick_chat_collection(page, COLLECTION)
    page.click("#answer-settings")  # greedy answers: the most faithful the small model gets
    page.locator("#temperature input[type=number]").fill("0")
    page.locator("#temperature input[type=number]").press("Enter")
    page.click("#answer-settings button")  # fold the settings away again
    send(page, "Who designed the Skerry lighthouse?")
    bot = page.locator("#chat [data-testid='bot']").last
    bot.filter(has_text="tokens/s").wait_for(timeout=120_000)
    bot.filter(has_text="Sources").wait_for(timeout=10_000)
    text = answer_text(page)
    assert "[1] lighthouse-history.md · The Skerry Lighthouse › Construction" in text, text
    assert "to find sources" in text
    first = bot.locator("details").first
    first.locator("summary").click()
    assert "Alan Brody" in first.inner_text()
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(artifacts_dir / "cited-answer.png"))
    if target := os.environ.get("DOCS_CITED_SCREENSHOT"):
        shutil.copy(artifacts_dir / "cited-answer.png", target)

    # The sources are stored with the conversation, which remembers its collection.
    page.reload()
    page.wait_for_selector("#message textarea")
    page.locator("#conversation-list label", has_text="Skerry").click()
    page.locator("#chat [data-testid='bot']").last.filter(has_text="lighthouse-history.md").wait_for(timeout=15_000)
    assert page.input_value("#chat-collection input") == COLLECTION

    # A follow-up's sources are numbered on from the first answer's: the list says so, not "[4]" out of nowhere.
    send(page, "How long should sourdough rise before baking?")
    follow = page.locator("#chat [data-testid='bot']").last
    follow.filter(has_text="tokens/s").wait_for(timeout=120_000)
    assert "numbered across this conversation: [1] to [" in follow.inner_text(), follow.inner_text()
    follow.screenshot(path=str(artifacts_dir / "follow-up-sources.png"))
    assert app.remote_requests == [], f"the page reached beyond this machine: {app.remote_requests}"


def test_add_a_folder_remove_a_file_then_delete_the_collection(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], tmp_path: Path
) -> None:
    app = start_app()
    page = open_page(app)
    open_documents(page)
    # No collection yet: nothing to remove or delete, and a dropped file waits in the box until one is created.
    expect(page.locator("#delete-collection")).to_be_hidden()
    expect(page.locator("#remove-file")).to_be_hidden()
    upload(page, [CORPUS / "sourdough.html"], expect="There is no collection yet")
    assert not (app.home / "documents").exists()
    create_collection(page, "Garden")
    page.locator("#ingest-progress", has_text="Added 1 file").wait_for(timeout=INGEST_TIMEOUT_MS)
    expect(page.locator("#delete-collection")).to_be_visible()
    folder = tmp_path / "garden-folder"
    folder.mkdir()
    for name in ("garden-guide.txt", "bike-parts.csv"):
        shutil.copy(CORPUS / name, folder / name)
    page.set_input_files("input[type=file][webkitdirectory]", str(folder))  # a whole folder, as the browser sends it
    page.locator("#ingest-progress", has_text="Added 2 files").wait_for(timeout=INGEST_TIMEOUT_MS)
    kept = app.home / "documents"
    assert len([p for p in kept.rglob("*") if p.is_file()]) == 3

    page.click("#file-picker input")
    page.get_by_role("option", name="bike-parts.csv").click()
    page.click("#remove-file")
    page.locator("#collection-summary", has_text="2 files").wait_for(timeout=30_000)
    assert set(table_rows(page)) == {"garden-guide.txt", "sourdough.html"}
    assert {p.name for p in kept.rglob("*") if p.is_file()} == {"garden-guide.txt", "sourdough.html"}

    page.click("#delete-collection")
    page.click("#keep-collection")  # the first click only asks
    assert "Garden" in page.inner_text("#collection-summary")
    page.click("#delete-collection")
    page.click("#confirm-delete-collection")
    page.locator("#collection-summary", has_text="No collections yet").wait_for(timeout=30_000)
    expect(page.locator("#delete-collection")).to_be_hidden()
    assert not [p for p in kept.rglob("*") if p.is_file()]
    page.get_by_role("tab", name="Chat").click()
    page.click("#chat-collection input")
    options = [text.replace("✓", "").strip() for text in page.get_by_role("option").all_inner_texts()]
    assert options == ["None (plain chat)"]


def test_chat_answers_while_a_long_ingestion_runs_and_cancel_keeps_what_was_done(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], tmp_path: Path
) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    topics = ["tides", "kites", "bread", "bikes", "ferns", "owls", "clocks", "maps"]
    for i in range(160):
        lines = [
            f"Note {i} about {topics[i % len(topics)]}, paragraph {j}: " + "words to embed " * 30 for j in range(8)
        ]
        (folder / f"note-{i:03}.txt").write_text("\n\n".join(lines))
    app = shared_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    open_documents(page)
    create_collection(page, "Many notes")
    page.set_input_files("#upload input[type=file]", [str(p) for p in sorted(folder.iterdir())])
    page.locator("#ingest-progress", has_text="Indexing").wait_for(timeout=60_000)
    assert "all files:" in page.inner_text("#ingest-progress")  # an estimate for the run while files remain

    page.get_by_role("tab", name="Chat").click()
    send(page, "Say hello in five words.")
    page.locator("#chat [data-testid='bot']").last.filter(has_text="tokens/s").wait_for(timeout=120_000)
    open_documents(page)
    progress = page.inner_text("#ingest-progress")
    assert "Indexing" in progress, f"the ingestion ended before the chat answered, so this proves nothing: {progress}"

    page.wait_for_function(
        "Number((document.querySelector('#ingest-progress').innerText.match(/Indexing (\\d+) of/) || [0, 0])[1]) > 20",
        timeout=120_000,
    )
    press_cancel(page)
    wait_for_report(page, "Cancelled after", app, 60_000)
    done = int(page.inner_text("#ingest-progress").split("Cancelled after ")[1].split()[0])
    assert 1 <= done < 160  # files read but not yet embedded when Cancel came are not counted as done
    page.locator("#collection-summary", has_text=f"{done} files").wait_for(timeout=10_000)
    rows = table_rows(page)
    assert rows and all(cells[0] == "indexed" for cells in rows.values())


def test_a_bookmarked_pdf_source_says_its_section_and_page(
    shared_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], tmp_path: Path
) -> None:
    app = shared_app()
    page = open_page(app)
    open_documents(page)
    create_collection(page, "Manual")
    upload(page, [write_bookmarked_pdf(tmp_path / "keeper-manual.pdf")], expect="Added 1 file")
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    pick_chat_collection(page, "Manual")
    send(page, "How often does the keeper polish the lens?")
    bot = page.locator("#chat [data-testid='bot']").last
    bot.filter(has_text="tokens/s").wait_for(timeout=120_000)
    bot.filter(has_text="Sources").wait_for(timeout=10_000)
    # As the user reads them under the answer: file, bookmark path, page.
    summaries = [s.strip() for s in bot.locator("details summary").all_inner_texts()]
    assert "[1] keeper-manual.pdf · Care › Lamps · page 2" in summaries, summaries
