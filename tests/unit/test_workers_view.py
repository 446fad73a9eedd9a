"""The Hardware tab's workers table: a row per paired worker as it answered, the problem of one that is down, text
from a worker escaped, and what to do when none is paired."""

from __future__ import annotations

from app.services.workers import PairedWorker, WorkerStatus
from app.ui.workers_view import NONE_PAIRED, pair_note, workers_html
from backends.workers.pairing import WorkerFacts


def _worker(address: str, device: str = "CPU: Test CPU", read_bytes_per_s: float = 0.0) -> PairedWorker:
    facts = WorkerFacts("127.0.0.1:41000", device, 6 << 30, 4, "0.1.0", "0.3.36", read_bytes_per_s)
    return PairedWorker(address, "token", "f" * 64, facts, 0.3)


def test_online_and_offline_workers_each_get_a_row_with_what_is_known() -> None:
    page = workers_html(
        [
            WorkerStatus(_worker("10.0.0.2:50052", read_bytes_per_s=11.84e9), True, 0.42, bandwidth_bytes_per_s=117e6),
            WorkerStatus(_worker("10.0.0.3:50052"), False, None, "The worker at 10.0.0.3:50052 does not answer."),
        ],
        as_of="09:15:02",
    )
    online, offline = page.split("<tr>")[2:]
    assert "<code>10.0.0.2:50052</code>" in online and "online" in online
    assert "6.0 GiB" in online and "0.42 ms · 936 Mbit/s" in online and "Hearth 0.1.0, llama.cpp 0.3.36" in online
    assert "4 · reads 11.8 GB/s" in online and "4 · read speed not measured" in offline  # a worker of before
    assert "offline</span>: The worker at 10.0.0.3:50052 does not answer." in offline
    assert "GiB" not in offline  # its free memory was not read now
    assert "Asked at 09:15:02." in page


def test_text_from_a_worker_is_escaped_and_none_paired_says_how_to_pair() -> None:
    page = workers_html([WorkerStatus(_worker("10.0.0.2:50052", "CPU: <img src=x onerror=alert(1)>"), True, 1.0)])
    assert "<img" not in page and "&lt;img src=x" in page
    assert workers_html([]) == NONE_PAIRED and "hearth worker --host ADDRESS" in NONE_PAIRED
    note = pair_note("10.0.0.2:50052", "CPU: X", 1 << 30, 0.5, 12.5e6)
    assert "Split across the paired workers" in note and "100 Mbit/s" in note


def test_link_speeds_read_as_networks_are_rated() -> None:
    from models.shared.wording import format_bits_per_s

    assert format_bits_per_s(125e6) == "1.0 Gbit/s"
    assert format_bits_per_s(1.5e9) == "12 Gbit/s"
    assert format_bits_per_s(12.5e6) == "100 Mbit/s"
    assert format_bits_per_s(100) == "800 bit/s"
