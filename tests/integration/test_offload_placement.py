"""Where the real llama.cpp puts a model's weights for the layer counts Hearth's planner gives it, against what the
planner counted: a llama.cpp RPC server on a private Unix socket stands in for a GPU (llama.cpp places layers on it
exactly as on one). llama.cpp counts the output projection as the first layer it offloads, and Hearth's tensor
override keeps it on this CPU when asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backends.memory import MIB, estimate_offload, llama_gpu_layers
from models.gguf import read_model_info

pytestmark = pytest.mark.integration

LOAD = """
import json, logging, sys
from backends.base import LoadOptions
from backends.llamacpp.log_route import route_llama_logs
from backends.llamacpp.native import NativeModel
from backends.local_socket import parse_local
from backends.workers.rpc import attach_workers

lines = []
handler = logging.Handler()
handler.emit = lambda record: lines.append(record.getMessage())
logging.getLogger("llama.cpp").addHandler(handler)
logging.getLogger("llama.cpp").setLevel(logging.DEBUG)
route_llama_logs()
attach_workers((parse_local(sys.argv[2]),))
model = NativeModel(sys.argv[1], LoadOptions(
    context_length=256, threads=1, gpu_layers=int(sys.argv[3]), tensor_split=(1.0,), output_on_cpu=sys.argv[4] == "1"
))
sizes = {}
for line in lines:
    if "model buffer size" in line:
        name, _, rest = line.partition(" model buffer size =")
        sizes[name.split()[-1]] = float(rest.split()[0])
print("SIZES:" + json.dumps(sizes))
"""


@pytest.fixture(scope="module")
def rpc_server(tmp_path_factory: pytest.TempPathFactory) -> str:
    from backends.local_socket import SOCKET_NAME, LocalSocket, connect, private_folder

    where = LocalSocket(private_folder("hearth-test-") / SOCKET_NAME)
    endpoint = str(where)
    cache = tmp_path_factory.mktemp("rpc-cache")
    server = subprocess.Popen(
        [sys.executable, "-m", "backends.workers.rpc_server", endpoint, str(cache), "1", str(os.getpid())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import time

    deadline = time.monotonic() + 30
    while not where.path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    connect(where, 5).close()
    yield endpoint  # type: ignore[misc]
    server.kill()
    server.wait()
    where.path.unlink()
    where.path.parent.rmdir()


def _buffers(model: Path, endpoint: str, gpu_layers: int, output_on_cpu: bool) -> dict[str, float]:
    ran = subprocess.run(
        [sys.executable, "-c", LOAD, str(model), endpoint, str(gpu_layers), "1" if output_on_cpu else "0"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    line = next(line for line in ran.stdout.splitlines() if line.startswith("SIZES:"))
    sizes: dict[str, float] = json.loads(line.removeprefix("SIZES:"))
    return sizes


def _on_worker(sizes: dict[str, float]) -> float:
    return sum(mib for name, mib in sizes.items() if name.startswith("RPC"))


@pytest.mark.parametrize("layers", [1, 12, 30])
def test_the_worker_holds_the_layers_and_the_output_projection_the_planner_counted(
    embedded_model: Path, rpc_server: str, layers: int
) -> None:
    info = read_model_info(embedded_model)
    counted = estimate_offload(info, 256, (layers,)).gpus[0].weights_bytes / MIB
    held = _on_worker(_buffers(embedded_model, rpc_server, llama_gpu_layers(layers, info.block_count), False))
    assert held == pytest.approx(counted, rel=0.02), (layers, held, counted)
    assert held > info.output_bytes / MIB  # the output projection went with the layers


def test_the_override_keeps_the_output_projection_on_this_cpu(embedded_model: Path, rpc_server: str) -> None:
    info = read_model_info(embedded_model)
    every = info.block_count
    counted = estimate_offload(info, 256, (every,), output_here=True)
    sizes = _buffers(embedded_model, rpc_server, llama_gpu_layers(every, every), True)
    assert _on_worker(sizes) == pytest.approx(counted.gpus[0].weights_bytes / MIB, rel=0.02)
    assert _on_worker(sizes) < sum(info.layer_bytes) / MIB * 1.01  # the layers and no output projection
    here = sum(mib for name, mib in sizes.items() if not name.startswith("RPC"))
    assert here == pytest.approx(counted.cpu.weights_bytes / MIB, rel=0.05), (sizes, counted.cpu)
