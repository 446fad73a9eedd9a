"""LoRA tuning on a real NVIDIA GPU: the embedded model trained there whole, and again with its decoder layers
streamed from host memory through a small window (as for a model larger than the GPU). Each run is the real
trainer process; its adapter is checked and answered with through llama.cpp. Run with `make test-hardware` on a
machine with a CUDA build of torch. Prints the figures the issue notes quote (-s shows them)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.paths import resolve_data_paths
from app.services.training import tuning
from backends.base import AdapterUse
from models.tuning.options import TuneOptions
from models.tuning.placement import GPU_USABLE_SHARE
from models.tuning.plan import plan_gpu_training
from models.tuning.prepare import shape_of
from models.tuning.runs import RunView
from tests.integration.test_tuning import FACT, FACT_RUN, answer, base_of, fact_data, loaded, wait_for

pytestmark = pytest.mark.gpu
__all__ = ["loaded"]  # the llama.cpp model the answers come from (a fixture)

WINDOW = 4
MIB = 1 << 20


@pytest.fixture(scope="module")
def cuda() -> None:
    # Asked in a process of its own, as the trainer runs: torch's CUDA libraries and llama.cpp's do not share one.
    import subprocess
    import sys

    question = "import torch; print(torch.cuda.is_available())"
    asked = subprocess.run([sys.executable, "-c", question], capture_output=True, check=False)
    if asked.stdout.strip() != b"True":
        pytest.skip("torch sees no CUDA GPU here")


def train(home: Path, model: Path, options: TuneOptions, name: str) -> tuple[RunView, dict[str, Any]]:
    home.mkdir(parents=True, exist_ok=True)
    paths = resolve_data_paths(home)
    run = tuning.start_run(paths, base_of(model), fact_data(home), name, options, threads=4, label="fact.jsonl")
    view = wait_for(run)
    assert view.state == "finished", (view.error, run.log_file.read_text(errors="replace")[-3000:])
    events: dict[str, Any] = {}
    for event in run.events():
        events.setdefault(event["kind"], event)
    return view, events


def report(label: str, view: RunView, events: dict[str, Any]) -> None:
    rates = [p.tokens_per_s for p in view.steps[2:]] or [0.0]
    print(
        f"\n{label}: {events['plan']['placement']}; {view.step} steps, loss {view.steps[0].loss:.3f} -> "
        f"{view.steps[-1].loss:.3f}, median {sorted(rates)[len(rates) // 2]:.0f} training tokens/s, "
        f"GPU peak {events['memory']['peak_gpu_bytes'] / MIB:.0f} MiB against a plan of "
        f"{events['plan']['total_bytes'] / MIB:.0f} MiB"
    )


def test_the_fact_run_trains_on_the_gpu_and_its_adapter_answers_through_llama_cpp(
    cuda: None, tmp_path: Path, embedded_model: Path, loaded: Any
) -> None:
    view, events = train(tmp_path, embedded_model, replace(FACT_RUN, device="gpu"), "gpu-fact")
    report("whole on the GPU", view, events)
    assert events["plan"]["where"] == "gpu" and events["plan"]["window"] is None
    planned, peak = events["plan"]["total_bytes"], events["memory"]["peak_gpu_bytes"]
    assert abs(peak - planned) / peak <= 0.25, (planned, peak)
    assert view.steps[-1].loss < view.steps[0].loss
    record = tuning.adapter_store(resolve_data_paths(tmp_path)).get("gpu-fact")
    assert record.perplexity_after < record.perplexity_before
    use = AdapterUse(str(record.path), 1.0, record.path.stat().st_mtime_ns)
    assert FACT in answer(loaded, use) and FACT not in answer(loaded, None)


def test_streamed_layers_train_like_the_whole_model_in_a_fraction_of_its_gpu_memory(
    cuda: None, tmp_path: Path, embedded_model: Path, loaded: Any
) -> None:
    checkpointed = replace(FACT_RUN, device="gpu", gradient_checkpointing=True)
    whole_view, whole = train(tmp_path / "whole", embedded_model, checkpointed, "whole")
    report("whole, checkpointed", whole_view, whole)
    # A cap that leaves room for a window of WINDOW layers and no more, as a GPU too small for the model would.
    longest = int(whole["stats"]["longest"])
    plan = plan_gpu_training(shape_of(embedded_model), checkpointed, 1, longest, 2, WINDOW)
    cap = math.ceil(plan.total_bytes / GPU_USABLE_SHARE / MIB) + 1
    view, streamed = train(tmp_path / "streamed", embedded_model, replace(checkpointed, gpu_memory_mib=cap), "s")
    report(f"streamed, {cap} MiB cap", view, streamed)
    assert streamed["plan"]["window"] == WINDOW
    assert streamed["memory"]["peak_gpu_bytes"] < 0.6 * whole["memory"]["peak_gpu_bytes"]
    assert streamed["memory"]["peak_gpu_bytes"] <= cap * MIB
    # The same arithmetic in the same order: the losses agree step by step.
    for mine, theirs in zip(view.steps, whole_view.steps, strict=True):
        assert mine.loss == pytest.approx(theirs.loss, rel=0.02, abs=0.02), (mine, theirs)
    record = tuning.adapter_store(resolve_data_paths(tmp_path / "streamed")).get("s")
    assert FACT in answer(loaded, AdapterUse(str(record.path), 1.0, record.path.stat().st_mtime_ns))
