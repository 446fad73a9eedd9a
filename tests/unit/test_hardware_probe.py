"""Probes that can hang are cut off; their failures become reasons, not crashes."""

import threading

import pytest

from backends.hardware import with_timeout


def test_a_driver_call_that_hangs_is_cut_off() -> None:
    release = threading.Event()  # never set while waiting: had the probe waited, the call would have returned
    with pytest.raises(TimeoutError) as caught:
        with_timeout(lambda: release.wait(30), 0.2, "NVML")
    release.set()
    assert "NVML did not answer" in str(caught.value)


def test_answers_and_errors_come_back_to_the_caller() -> None:
    assert with_timeout(lambda: 42, 1.0, "quick") == 42
    with pytest.raises(RuntimeError, match="driver mismatch"):
        with_timeout(lambda: (_ for _ in ()).throw(RuntimeError("driver mismatch")), 1.0, "broken")
