"""Which of this machine's devices a `hearth worker` serves: ``--device cpu`` (the default) or ``--device cuda:N``,
the N-th NVIDIA GPU as llama.cpp numbers them (``CUDA0``, ``CUDA1``…). Pure: the devices llama.cpp lists are passed
in (``backends.workers.rpc.servable_devices`` reads them)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from models.shared.errors import HearthError

# ggml_backend_dev_type
DEVICE_CPU, DEVICE_GPU = 0, 1
_SPELLING = "Write --device cpu, or --device cuda:N for the N-th NVIDIA GPU (cuda:0 is the first)."


class BadDevice(HearthError):
    """A --device that is not cpu or cuda:N, or names a device this llama.cpp does not have."""


@dataclass(frozen=True)
class ServableDevice:
    name: str  # llama.cpp's: CPU, CUDA0
    description: str  # the hardware: "NVIDIA GeForce RTX 4090", the CPU's model
    kind: int  # ggml_backend_dev_type
    free_bytes: int
    total_bytes: int

    @property
    def gpu(self) -> bool:
        return self.kind == DEVICE_GPU

    @property
    def label(self) -> str:
        """How mains show it (and read it: a label that does not start with CPU is a GPU to the planner)."""
        return f"GPU {self.name}: {self.description}" if self.gpu else f"CPU: {self.description}"


def pick_device(spec: str, devices: tuple[ServableDevice, ...]) -> ServableDevice:
    """The device ``spec`` names among ``devices``, or why not, with what there is."""
    wanted = spec.strip().lower()
    if wanted == "cpu":
        for device in devices:
            if device.kind == DEVICE_CPU:
                return device
        raise BadDevice("This llama.cpp lists no CPU device to serve.", "Rebuild it with `make setup`.")
    match = re.fullmatch(r"cuda:(\d+)", wanted)
    if match is None:
        raise BadDevice(f"Unknown device {spec!r}.", _SPELLING)
    cuda = [d for d in devices if d.gpu and d.name.upper().startswith("CUDA")]
    index = int(match.group(1))
    if index < len(cuda):
        return cuda[index]
    if not cuda:
        raise BadDevice(
            f"There is no {wanted} here: this llama.cpp has no CUDA device (it lists "
            f"{', '.join(d.name for d in devices) or 'nothing'}).",
            "On a machine with an NVIDIA GPU, run `make setup` with CUDA's nvcc installed (it builds llama.cpp "
            "with CUDA); or serve the CPU with --device cpu.",
        )
    raise BadDevice(
        f"There is no {wanted} here: llama.cpp lists {len(cuda)} CUDA device(s), "
        f"{', '.join(f'cuda:{i} ({d.description})' for i, d in enumerate(cuda))}.",
        f"Use --device cuda:0 to cuda:{len(cuda) - 1}.",
    )
