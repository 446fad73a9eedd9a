"""llama.cpp with CUDA on a real NVIDIA GPU: the plan, the offload and an answer. Run with `make test-hardware` on
a machine with a GPU and a CUDA build of llama-cpp-python (`make setup` builds one when nvcc is present)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from app.services.container import build_services
from app.settings import load_settings
from backends.base import CancelToken, ChatMessage, GenerationParams, TextDelta
from backends.hardware import probe

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda_machine() -> None:
    inventory = probe()
    if not inventory.gpus:
        pytest.skip(f"no NVIDIA GPU here ({inventory.gpu_problem or 'NVML lists none'})")
    if inventory.llama_cpp is None or "cuda" not in inventory.llama_cpp.ggml_backends:
        pytest.fail("this machine has a GPU but llama-cpp-python was built without CUDA: run `make setup`")


def test_the_embedded_model_runs_entirely_on_the_gpu(cuda_machine: None, isolated_home: Path) -> None:
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("llama.cpp").addHandler(handler)
    logging.getLogger("llama.cpp").setLevel(logging.DEBUG)
    services = build_services(load_settings())
    try:
        list(services.runtime.load(services.model_choice()))
        plan = services.runtime.status.plan
        assert plan is not None and plan.label == "llama.cpp (CUDA)"
        assert plan.gpu_layers == plan.placements[0].layers + 1
        offloaded = next(line for line in lines if "offloaded" in line and "layers to GPU" in line)
        done, total = map(int, re.search(r"offloaded (\d+)/(\d+)", offloaded).groups())  # type: ignore[union-attr]
        assert done == total
        cuda_mib = sum(
            float(m.group(1)) for line in lines if (m := re.search(r"CUDA\d* \w* ?buffer size =\s+([\d.]+)", line))
        )
        estimate_mib = plan.placements[0].memory.total_bytes / (1 << 20)
        assert abs(estimate_mib - cuda_mib) / cuda_mib <= 0.15, (estimate_mib, cuda_mib)
        with services.runtime.lease() as engine:
            events = engine.stream_chat(
                [ChatMessage("user", "What is the capital of France?")], GenerationParams(0.0, 16), CancelToken()
            )
            assert "Paris" in "".join(e.text for e in events if isinstance(e, TextDelta))
    finally:
        services.close()
        logging.getLogger("llama.cpp").removeHandler(handler)


def test_the_pipeline_bench_reads_the_gpus_energy(cuda_machine: None) -> None:
    from app.bench.meters import energy_j, energy_source

    assert "NVML (" in energy_source()
    first = energy_j()
    assert first is not None and first > 0  # millijoules since the driver loaded, as joules


def test_a_worker_serving_its_gpu_holds_the_layers_and_the_main_answers_through_it(
    cuda_machine: None, isolated_home: Path, embedded_model: Path
) -> None:
    """`hearth worker --device cuda:0` on loopback, paired, and `--backend pipeline`: the layers on the worker's
    GPU (the plan names it and gives no "slower than this machine alone", which is for CPU workers)."""
    from tests.e2e.conftest import free_port
    from tests.helpers import run_hearth, start_worker

    port = free_port()
    worker = start_worker(isolated_home / "worker", port, "--device", "cuda:0")
    try:
        assert worker.stdout is not None
        serving = worker.stdout.readline()
        assert "serving this machine's CUDA0 (" in serving, serving
        code = worker.stdout.readline().removeprefix("pairing code: ").strip()
        added = run_hearth(isolated_home, "workers", "add", f"127.0.0.1:{port}", "--code", code, timeout=120)
        assert added.returncode == 0, added.stderr
        listed = run_hearth(isolated_home, "workers", "list", timeout=60)
        assert "GPU CUDA0: " in listed.stdout, listed.stdout
        doctor = run_hearth(isolated_home, "doctor", "--backend", "pipeline", "--model", str(embedded_model))
        assert doctor.returncode == 0, doctor.stderr
        assert "slower than this machine alone" not in doctor.stdout
        answered = run_hearth(
            isolated_home,
            "chat",
            "--backend",
            "pipeline",
            "--model",
            str(embedded_model),
            "--temperature",
            "0",
            "--max-tokens",
            "16",
            "What is the capital of France?",
        )
        assert answered.returncode == 0, answered.stderr
        assert "Paris" in answered.stdout
    finally:
        worker.terminate()
        worker.wait(timeout=30)
