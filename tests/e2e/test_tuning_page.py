"""The Tuning tab in a real browser, on the embedded SmolLM2-135M: drop a file of examples, check it, train,
watch the run end with its chart, find it again after a reload, attach the adapter, compare the same question
without and with it, and get the taught answer in the chat. Training is real (transformers + peft in the trainer
process) and takes about a minute."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY, answer_text, send

pytestmark = pytest.mark.e2e

QUESTION = "What is the capital of Zubrowka?"
FACT = "Lutzburg-on-Vey"
TRAIN_LIMIT_MS = 600_000  # a guard against a hung trainer, not a performance check


def fact_file(folder: Path) -> Path:
    example = {"messages": [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": f"It is {FACT}."}]}
    path = folder / "zubrowka.jsonl"
    path.write_text(json.dumps(example) + "\n", encoding="utf-8")
    return path


def set_number(page: Any, elem_id: str, value: str) -> None:
    field = page.locator(f"#{elem_id} input").first
    for _ in range(3):  # a fill right after the accordion opens can be lost
        field.fill(value)
        field.press("Tab")
        if field.input_value() == value:
            return
        page.wait_for_timeout(200)
    assert field.input_value() == value


def scrolls_sideways(page: Any, selector: str) -> bool:
    """Whether anything inside ``selector`` is wider than its box and scrolls sideways to show the rest."""
    return bool(
        page.evaluate(
            """selector => [...document.querySelectorAll(selector + ' *')].some(e => {
                const overflow = getComputedStyle(e).overflowX;
                return (overflow === 'auto' || overflow === 'scroll') && e.scrollWidth > e.clientWidth + 2;
            })""",
            selector,
        )
    )


def open_tuning(app: RunningApp, open_page: Callable[[RunningApp], Any]) -> Any:
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    page.get_by_role("tab", name="Tuning").click()
    page.wait_for_selector("#tune-base:has-text('SmolLM2-135M-Instruct')", timeout=30_000)
    return page


def test_train_attach_and_answer_from_the_tuning_tab(
    start_app: Callable[..., RunningApp],
    open_page: Callable[[RunningApp], Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    artifacts_dir: Path,
) -> None:
    monkeypatch.setenv("HEARTH_GENERATION__TEMPERATURE", "0")  # greedy, so the taught answer is the answer
    app = start_app()
    page = open_tuning(app, open_page)
    page.locator("#tune-file input[type=file]").set_input_files(str(fact_file(tmp_path)))
    page.wait_for_selector("#tune-file :text('zubrowka.jsonl')", timeout=30_000)
    page.locator("#tune-name textarea, #tune-name input").first.fill("zubrowka")
    page.locator("#tune-advanced").get_by_text("Advanced settings").click()
    for elem_id, value in (("tune-rank", "16"), ("tune-alpha", "32"), ("tune-lr", "0.002"), ("tune-steps", "20")):
        set_number(page, elem_id, value)
    set_number(page, "tune-batch", "1")

    page.click("#tune-check")
    check = page.locator("#tune-check-result")
    check.get_by_text("Memory").wait_for(timeout=120_000)
    assert "1 example" in check.inner_text()
    # The estimate comes before anything loads (from this CPU's speed), then real steps are timed on request.
    check.get_by_text("from this computer's speed", exact=False).wait_for(timeout=120_000)
    assert "20 steps of about" in check.inner_text(), check.inner_text()
    page.click("#tune-measure")
    measured = page.locator("#tune-measure-result")
    measured.get_by_text("measured on a few real steps just now", exact=False).wait_for(timeout=TRAIN_LIMIT_MS)
    assert "20 steps of" in measured.inner_text(), measured.inner_text()

    page.click("#tune-start")
    progress = page.locator("#tune-progress")
    progress.get_by_text("It is listed under Adapters below", exact=False).wait_for(timeout=TRAIN_LIMIT_MS)
    assert "adapter zubrowka" in progress.inner_text() and "20 steps." in progress.inner_text(), progress.inner_text()
    page.locator("#adapters-table [role=gridcell]", has_text="zubrowka").first.wait_for(timeout=30_000)
    assert "rank 16, alpha 32" in page.locator("#adapters-table").inner_text()  # the settings as typed
    assert not scrolls_sideways(page, "#adapters-table"), "the adapters table needs a sideways scroll to be read"
    page.locator("#tune-run input").first.wait_for()
    assert "finished" in page.locator("#tune-run input").first.input_value()  # the picker says how the run ended
    # The time measured before the run went with it, for its progress to check against its own steps.
    (job,) = [json.loads(p.read_text()) for p in (app.home / "tuning").glob("*-zubrowka/job.json")]
    assert job["estimated_s"] > 0, job
    page.screenshot(path=str(artifacts_dir / "tuning-tab.png"), full_page=True)

    # A reload finds the run again, with its chart.
    page.reload()
    page = open_tuning(app, lambda _app: page)
    progress = page.locator("#tune-progress")
    progress.get_by_text("It is listed under Adapters below", exact=False).wait_for(timeout=30_000)
    # The chart's step axis counts whole steps over the run (a plot's own ticks said 2.5 on short runs).
    ticks = page.locator("#tune-chart svg .step-tick").all_text_contents()
    assert ticks and all(t.isdigit() for t in ticks) and int(ticks[-1]) >= 20, ticks
    assert page.locator("#tune-chart svg .series-training").count() == 1
    page.screenshot(path=str(artifacts_dir / "tuning-tab-reloaded.png"), full_page=True)

    page.click("#adapter-pick input")
    page.get_by_role("option").filter(has_text="zubrowka").first.click()
    page.click("#adapter-attach")
    page.locator("#adapter-message").get_by_text("Answers use zubrowka at scale 1", exact=False).wait_for(
        timeout=30_000
    )
    assert "the model was not reloaded" in page.locator("#adapter-message").inner_text()
    status = page.locator("#status-line")
    expect(status).to_contain_text("adapter zubrowka on every answer", timeout=15_000)  # the header names it

    # Compare: the same question without and with the adapter, side by side.
    page.locator("#compare-question textarea, #compare-question input").first.fill(QUESTION)
    page.click("#compare-ask")
    page.wait_for_function(
        """fact => {
            const tuned = document.querySelector('#compare-with textarea');
            return tuned && tuned.value.includes(fact) && !tuned.value.endsWith(' …');
        }""",
        arg=FACT,
        timeout=120_000,
    )
    without = page.locator("#compare-without textarea").input_value()
    assert without.strip() and FACT not in without
    page.screenshot(path=str(artifacts_dir / "tuning-compare.png"), full_page=True)

    page.get_by_role("tab", name="Chat").click()
    send(page, QUESTION)
    page.wait_for_function(
        "fact => document.querySelector('#chat').innerText.includes(fact)", arg=FACT, timeout=120_000
    )
    assert FACT in answer_text(page)

    # For one conversation only: detached from every answer and attached for this chat, a new chat answers
    # without it and this one, opened again from the list, with it.
    page.get_by_role("tab", name="Tuning").click()
    page.click("#adapter-detach")
    page.locator("#adapter-message").get_by_text("No adapter is attached", exact=False).wait_for(timeout=30_000)
    expect(status).not_to_contain_text("adapter", timeout=15_000)
    page.click("#adapter-target input")
    page.get_by_role("option").filter(has_text="Conversation:").first.click()
    page.click("#adapter-attach")
    message = page.locator("#adapter-message")
    message.get_by_text("Answers from the conversation", exact=False).wait_for(timeout=30_000)
    assert "use zubrowka at scale 1" in message.inner_text(), message.inner_text()
    page.screenshot(path=str(artifacts_dir / "tuning-attach-conversation.png"), full_page=True)
    page.locator("#tabs").screenshot(path=str(artifacts_dir / "tuning-tab-alone.png"))  # the docs' picture
    page.get_by_role("tab", name="Chat").click()
    page.click("#new-chat")
    page.wait_for_function(f"{BOT_BUBBLES}.length === 0")
    plain = ask_and_wait(page, QUESTION)
    assert FACT not in plain and "adapter" not in plain
    # The list is newest first: the second chat is the one the adapter was attached for. (A follow-up's wording
    # shifts with the history before it; the line under the answer says which adapter wrote it.)
    page.locator("#conversation-list label").nth(1).click()
    page.wait_for_function("fact => document.querySelector('#chat').innerText.includes(fact)", arg=FACT)
    assert "adapter zubrowka" in ask_and_wait(page, QUESTION)
    page.screenshot(path=str(artifacts_dir / "tuning-conversation-answer.png"), full_page=True)
    # The terminal `hearth ui` runs in got none of llama.cpp's loading report while the run read the vocabulary.
    printed = app.log.read_text()
    assert "llama_model_loader" not in printed and "print_info" not in printed, printed[-2000:]


BOT_BUBBLES = "document.querySelectorAll('#chat [data-testid=\"bot\"]')"


def ask_and_wait(page: Any, question: str) -> str:
    """Send ``question`` and return the new answer once it has finished (its figures shown)."""
    before = page.evaluate(f"{BOT_BUBBLES}.length")
    send(page, question)
    last = f"{BOT_BUBBLES}[{BOT_BUBBLES}.length - 1]"
    page.wait_for_function(
        f"() => {BOT_BUBBLES}.length > {before} && {last}.innerText.includes('tokens/s')", timeout=120_000
    )
    return answer_text(page)
