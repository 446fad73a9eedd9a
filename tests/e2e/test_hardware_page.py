"""The Hardware tab in a real browser: the machine and the plan with reasons, then switching the backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.conftest import RunningApp
from tests.e2e.test_chat_page import STATUS_READY, send

pytestmark = pytest.mark.e2e


def choose(page: Any, dropdown: str, option: str) -> None:
    page.click(f"{dropdown} input")
    page.get_by_role("option", name=option).click()


def test_the_plan_is_explained_and_the_backend_can_be_switched(
    start_app: Callable[..., RunningApp], open_page: Callable[[RunningApp], Any]
) -> None:
    app = start_app()
    page = open_page(app)
    page.wait_for_selector(STATUS_READY, timeout=60_000)
    page.get_by_role("tab", name="Hardware").click()
    page.wait_for_selector("#plan-reasons", timeout=15_000)
    assert "physical" in page.inner_text("#machine") and "RAM:" in page.inner_text("#machine")
    reasons = page.inner_text("#plan-reasons")
    assert "llama.cpp (CPU): the best fit for this machine" in reasons
    assert "one per physical core" in reasons
    assert page.locator("#plan-bars .memory-bar[data-device='CPU']").count() == 1

    # A backend this machine cannot run: refused with the reason, and the running model keeps working.
    choose(page, "#backend-choice", "llama.cpp on NVIDIA GPUs (CUDA)")
    page.click("#switch")
    page.locator("#switch-progress", has_text="Not switched").wait_for(timeout=30_000)
    assert "NVIDIA" in page.inner_text("#switch-progress")
    assert "llama.cpp (CPU)" in page.inner_text("#status-line")

    choose(page, "#backend-choice", "OpenVINO (Intel NPU, GPU or CPU)")
    page.click("#switch")
    page.locator("#switch-progress", has_text="Now running on OpenVINO (CPU)").wait_for(timeout=120_000)
    assert "OpenVINO (CPU) · " in page.inner_text("#status-line")
    assert "OpenVINO (CPU): chosen by you" in page.inner_text("#plan-reasons")

    page.get_by_role("tab", name="Chat").click()
    send(page, "Name a colour.")
    bot = page.locator("#chat [data-testid='bot']").last
    bot.filter(has_text="tokens/s").wait_for(timeout=120_000)
    assert len(bot.inner_text().split("to first token")[0].strip()) > 1
    assert app.remote_requests == []
