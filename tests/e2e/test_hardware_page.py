"""The Hardware tab in a real browser: the machine (free memory read again on demand), the plan with the reason
for every route not taken, a refused switch that puts the pickers back, and a switch to OpenVINO whose compile
shows its seconds ticking."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY, send

pytestmark = pytest.mark.e2e

RAM_AS_OF = re.compile(r"RAM: .* available of .* \(as of (\d\d:\d\d:\d\d)\)")
COMPILING = re.compile(r"Compiling .*for the CPU.*… \d+ s")


def choose(page: Any, dropdown: str, option: str) -> None:
    page.click(f"{dropdown} input")
    page.get_by_role("option", name=option).click()


def ram_as_of(page: Any) -> str:
    found = RAM_AS_OF.search(page.inner_text("#machine"))
    assert found, page.inner_text("#machine")
    return found.group(1)


def test_the_plan_is_explained_and_the_backend_can_be_switched(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any], embedded_model: Path
) -> None:
    app = start_app("--model", str(embedded_model))  # a model OpenVINO's GGUF reader opens
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    page.get_by_role("tab", name="Hardware").click()
    page.wait_for_selector("#plan-why", timeout=15_000)
    assert "physical" in page.inner_text("#machine")
    assert "avx" not in page.inner_text("#machine").split("Details")[0]  # the instruction sets: under Details

    # The choice in a line; under Details every other route and why it was not taken, never "the best fit".
    why = page.inner_text("#plan-why")
    assert "llama.cpp (CPU): chosen automatically — no GPU or NPU here can run this model" in why
    page.click("#plan-details summary")
    reasons = page.inner_text("#plan-reasons")
    assert "best fit" not in why + reasons
    for route in ("NVIDIA GPU (llama.cpp with CUDA)", "Intel GPU (OpenVINO)", "Intel NPU (OpenVINO)"):
        assert f"Not chosen — {route}" in reasons or f"/ {route}" in reasons
    assert "Not chosen — NVIDIA GPU (llama.cpp with CUDA): no NVIDIA GPU found" in reasons
    assert "OpenVINO on the CPU: available" in reasons  # OpenVINO opens the embedded GGUF; why not it, then
    assert "one per physical core" in reasons
    assert page.locator("#plan-bars .memory-bar[data-device='CPU']").count() == 1

    # Free memory is read when asked for, not kept from start-up.
    first = ram_as_of(page)
    page.wait_for_timeout(1_100)  # the clock on the line moves on by at least a second
    page.click("#refresh-machine")
    page.wait_for_function(f"!document.querySelector('#machine').innerText.includes('(as of {first})')", timeout=15_000)
    assert ram_as_of(page) != first

    # A backend this machine cannot run is labelled so; chosen anyway, it is refused and the picker goes back.
    page.click("#backend-choice input")
    cuda = page.get_by_role("option", name="llama.cpp on NVIDIA GPUs (CUDA)")
    assert "not available here: no NVIDIA GPU found" in cuda.inner_text()
    cuda.click()
    page.click("#switch")
    page.locator("#switch-progress", has_text="Not switched").wait_for(timeout=30_000)
    assert "NVIDIA" in page.inner_text("#switch-progress")
    assert "llama.cpp (CPU)" in page.inner_text("#status-line")
    page.wait_for_function(
        "document.querySelector('#backend-choice input').value === 'Automatic (best for this machine)'",
        timeout=15_000,
    )

    # OpenVINO compiles the model first: the step shows its seconds while it runs, then the plan says who chose.
    choose(page, "#backend-choice", "OpenVINO (Intel NPU, GPU or CPU)")
    page.click("#switch")
    seen: list[str] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        text = page.inner_text("#switch-progress")
        if not seen or seen[-1] != text:
            seen.append(text)
        if text.startswith(("Now running", "Not switched")):
            break
        page.wait_for_timeout(200)
    assert seen[-1] == "Now running on OpenVINO (CPU).", seen
    assert any(COMPILING.search(text) for text in seen), seen
    assert not any("%" in text for text in seen), seen  # no frozen percentage
    assert "OpenVINO (CPU) · " in page.inner_text("#status-line")
    assert "OpenVINO (CPU): chosen by you" in page.inner_text("#plan-why")
    assert page.input_value("#backend-choice input") == "OpenVINO (Intel NPU, GPU or CPU)"

    page.get_by_role("tab", name="Chat").click()
    send(page, "Name a colour.")
    bot = page.locator("#chat [data-testid='bot']").last
    bot.filter(has_text="tokens/s").wait_for(timeout=120_000)
    assert len(bot.inner_text().split("to first token")[0].strip()) > 1
    assert app.remote_requests == []
