"""The numbers behind an ingestion's progress: a step's rate and time left, how many passages go to the embedder
at a time, and how a file's place in the run is counted."""

import pytest

from app.ingest_text import duration_words, step_words
from rag.ingest import EMBED_CALL_S, EMBED_SLICE_MAX, EMBED_SLICE_MIN, next_slice
from rag.ingest_progress import Meter, StepProgress, run_eta, step_progress


def test_a_step_has_a_rate_and_a_time_left_as_soon_as_something_is_done() -> None:
    assert step_progress("reading", 0, 196, elapsed_s=0.4) == StepProgress("reading", 0, 196, 0.4, 0.0, None)
    step = step_progress("reading", 20, 196, elapsed_s=2.0)
    assert (step.per_s, step.eta_s) == (10.0, 17.6)
    assert step_progress("reading", 20, None, elapsed_s=2.0).eta_s is None  # pages not counted: no ETA
    assert step_progress("embedding", 900, 900, elapsed_s=30.0).eta_s == 0.0


def test_the_place_of_a_file_counts_every_file_once_in_order() -> None:
    meter = Meter(total_files=3, total_bytes=300)
    places = []
    for name in ("a.md", "b.pdf", "c.txt"):
        meter.next_file(name)
        places.append((meter.progress().position, meter.progress().current))
    assert places == [(1, "a.md"), (2, "b.pdf"), (3, "c.txt")]
    assert meter.progress().eta_s is None  # nothing finished yet, so no estimate for the run
    meter.bytes_done = 100
    assert meter.progress().eta_s is not None
    assert meter.finished().current == "" and meter.finished().position == 3


def test_the_run_has_an_estimate_from_its_first_passages_not_its_first_file() -> None:
    meter = Meter(total_files=2, total_bytes=1_000)
    meter.next_file("big.pdf")
    meter.embedding_bytes = 800  # the first file, whose passages are being embedded
    assert meter.progress(step_progress("reading", 3, 10, elapsed_s=1.0)).eta_s is None  # no passage yet
    quarter = step_progress("embedding", 25, 100, elapsed_s=1.0)
    assert meter.embedding_share(quarter) == 200.0
    eta = meter.progress(quarter).eta_s
    assert eta is not None and eta > 0
    assert run_eta(1_000, 200.0, 10.0) == 40.0  # 200 bytes in 10 s: 800 more take 40 s
    assert run_eta(1_000, 0.0, 10.0) is None and run_eta(1_000, 1_000.0, 10.0) == 0.0


@pytest.mark.parametrize(
    ("size", "took_s", "expected"),
    [
        (8, EMBED_CALL_S / 4, 16),  # fast: grows, at most twofold
        (8, EMBED_CALL_S, 8),  # on target: stays
        (32, EMBED_CALL_S * 4, 8),  # slow (a busy machine): shrinks at once
        (8, 100.0, EMBED_SLICE_MIN),  # never below the minimum
        (64, 0.0, EMBED_SLICE_MAX),  # never above the maximum
    ],
)
def test_embedding_calls_aim_at_a_fixed_time_so_cancel_is_never_far(size: int, took_s: float, expected: int) -> None:
    assert next_slice(size, took_s) == expected


def test_step_words_read_like_a_sentence() -> None:
    assert step_words(StepProgress("splitting")) == "splitting into passages"
    assert step_words(StepProgress("embedding", 0, 873)) == "embedding 0 of 873 passages"
    slow = StepProgress("embedding", 8, 873, elapsed_s=5.0, per_s=1.6, eta_s=540.6)
    assert step_words(slow) == "embedding 8 of 873 passages · 1.6 passages/s · about 9 min to go"
    assert duration_words(0.2) == "1 s"
    assert duration_words(89) == "1 min"
