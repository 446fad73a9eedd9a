"""The tuning memory plan against the peak RSS the training process really reaches (it reports its own peak
after training), on the embedded SmolLM2-135M and on Qwen2.5-Coder-0.5B, within ±20%.

Each run is cancelled after its first step: the peak is reached in the first forward and backward pass, and the
export and check after training are tested elsewhere."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.services.training import tuning
from models.gguf import sha256_of
from models.tuning.options import TuneOptions
from tests.helpers import QWEN25_CODER_05B, assembled_model

pytestmark = pytest.mark.integration

TOLERANCE = 0.20
RUN_LIMIT_S = 900  # a guard against a hung trainer, not a performance check


def long_texts(folder: Path, count: int = 6) -> Path:
    """Real prose long enough to fill every example to the max length: the GPL, which Debian ships."""
    licence = Path("/usr/share/common-licenses/GPL-3")
    text = licence.read_text(encoding="utf-8") if licence.is_file() else " ".join(["Tuning text."] * 4000)
    size = len(text) // count
    path = folder / "texts.jsonl"
    path.write_text("".join(json.dumps({"text": text[i * size : (i + 1) * size]}) + "\n" for i in range(count)))
    return path


def measured_against_plan(home: Path, model: Path, data: Path, options: TuneOptions) -> tuple[int, int]:
    paths = resolve_data_paths(home)
    base = tuning.BaseModel(model, sha256_of(model), model.name)
    run = tuning.start_run(paths, base, data, "memory", options, threads=2)
    deadline = time.monotonic() + RUN_LIMIT_S
    while run.trainer_alive():
        if run.view().step >= 1:
            tuning.cancel_run(run)
        assert time.monotonic() < deadline, run.view()
        time.sleep(0.2)
    events = {event["kind"]: event for event in run.events()}
    assert "memory" in events, run.view().error
    return events["plan"]["total_bytes"], events["memory"]["peak_rss_bytes"]


@pytest.mark.parametrize(
    "options",
    [
        TuneOptions(rank=16, alpha=32, batch_size=2, max_length=512, max_steps=2),
        TuneOptions(rank=16, alpha=32, batch_size=2, max_length=512, max_steps=2, gradient_checkpointing=True),
    ],
    ids=["plain", "gradient-checkpointing"],
)
def test_the_plan_for_the_embedded_model_is_within_20_percent_of_the_measured_peak(
    isolated_home: Path, tmp_path: Path, embedded_model: Path, options: TuneOptions
) -> None:
    planned, peak = measured_against_plan(isolated_home, embedded_model, long_texts(tmp_path), options)
    assert abs(planned - peak) <= TOLERANCE * peak, (planned >> 20, peak >> 20)


def test_the_plan_for_qwen_0_5b_is_within_20_percent_of_the_measured_peak(isolated_home: Path, tmp_path: Path) -> None:
    model = assembled_model(QWEN25_CODER_05B)
    options = TuneOptions(rank=16, alpha=32, batch_size=1, max_length=512, max_steps=2)
    planned, peak = measured_against_plan(isolated_home, model, long_texts(tmp_path), options)
    assert abs(planned - peak) <= TOLERANCE * peak, (planned >> 20, peak >> 20)
