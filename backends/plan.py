"""What a plan is made of: what the user asked for (``Preferences``), the devices that can hold a model's layers
(``Device``: this CPU, an NVIDIA GPU, an Intel GPU or NPU, a paired worker's device), what each holds
(``Placement``: a range of layers and its memory), and the plan a backend proposes (``BackendPlan``), from which
llama.cpp's load settings are read. Part of the backend contract (``backends/base.py``); the rules every proposal
shares are in ``backends/placement.py``, the choice among them in ``backends/selection.py``. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from backends.base import LoadOptions, WorkerLink
from backends.hardware import HardwareInventory
from backends.memory import KV_WIDTHS, MemoryEstimate, llama_gpu_layers
from models.shared.errors import BackendUnavailable, DoesNotFit

if TYPE_CHECKING:
    from backends.workers.cost import LinkFacts  # only named: the contract does not depend on the workers
    from models.gguf import ModelInfo


@dataclass(frozen=True)
class Preferences:
    """What the user asked for; ``auto`` and ``None`` leave the choice to Hearth."""

    backend: str = "auto"  # auto, llamacpp, cuda (llama.cpp on NVIDIA GPUs), openvino, fake
    threads: int | None = None
    context_length: int = 4096
    device: str = "auto"  # auto, cpu, cuda, cuda:N, gpu (Intel, OpenVINO), npu, or an OpenVINO id such as GPU.1
    gpu_layers: int | None = None
    slots: int = 1  # answers written at once, each with a context of its own (backends that batch; others: 1)
    workers: tuple[str, ...] = ()  # `hearth worker` addresses, for the pipeline backend
    worker_links: tuple[LinkFacts, ...] = ()  # their links as measured at pairing (any order; matched by address)
    kv_cache_type: str = "f16"  # llama.cpp's context cache: f16, q8_0, q4_0


DeviceKind = Literal["cpu", "cuda", "openvino", "worker"]


@dataclass(frozen=True)
class Device:
    """A device that can hold a model's layers: this computer's CPU, an NVIDIA GPU (llama.cpp's CUDA), an Intel GPU
    or NPU (OpenVINO), or the device of a paired `hearth worker` (llama.cpp's RPC). Shown by its ``id``."""

    kind: DeviceKind
    id: str  # "CPU", "cuda:0", "GPU.0", "NPU", "RPC host:port"
    index: int = 0  # a CUDA GPU's number (llama.cpp's main_gpu)
    address: str = ""  # a worker's address

    def __str__(self) -> str:
        return self.id

    @property
    def offloads(self) -> bool:
        """Whether llama.cpp counts layers here as offloaded (``n_gpu_layers``): a CUDA GPU or a worker's device."""
        return self.kind in ("cuda", "worker")


CPU = Device("cpu", "CPU")


def cuda_device(index: int) -> Device:
    return Device("cuda", f"cuda:{index}", index=index)


def openvino_device(device_id: str) -> Device:
    """An OpenVINO device by OpenVINO's own id ("GPU.0", "NPU"); its "CPU" is this computer's CPU."""
    return CPU if device_id == "CPU" else Device("openvino", device_id)


def worker_device(address: str) -> Device:
    return Device("worker", f"RPC {address}", address=address)


@dataclass(frozen=True)
class Placement:
    """What one device holds under a plan: ``layers`` decoder layers from ``first_layer`` on (see ``layer_range``)."""

    device: Device
    name: str
    layers: int
    memory: MemoryEstimate
    available_bytes: int
    first_layer: int = 0
    # It holds the output projection. Only said where it is not llama.cpp's own choice (the device with the last
    # offloaded layers): this CPU keeping it while every layer is on workers (a tensor override when it loads).
    output: bool = False

    @property
    def layer_range(self) -> range:
        return range(self.first_layer, self.first_layer + self.layers)


def in_layer_order(placements: Sequence[Placement]) -> tuple[Placement, ...]:
    """``placements`` (in their order) with their layer ranges as llama.cpp lays them out: the layers it does not
    offload first, on the CPU, then each offloading device's in turn; a device that does not offload (OpenVINO's)
    holds them all from 0."""
    kept = [p for p in placements if not p.device.offloads]
    start = sum(p.layers for p in kept if p.device.kind == "cpu")
    ranged: list[Placement] = []
    for placement in placements:
        if placement.device.offloads:
            ranged.append(replace(placement, first_layer=start))
            start += placement.layers
        else:
            ranged.append(replace(placement, first_layer=0))
    return tuple(ranged)


@dataclass(frozen=True)
class BackendPlan:
    """Where and how a backend runs a model. llama.cpp's load settings — the layers offloaded, their split across
    GPUs or workers, the main GPU, the workers — are read off the placements (``load_options``), not kept beside
    them."""

    backend: str
    label: str
    threads: int
    context_length: int
    memory: MemoryEstimate
    reasons: tuple[str, ...]
    placements: tuple[Placement, ...] = field(default=())
    device: str = ""  # the backend's own device string
    slots: int = 1  # answers written at once; ``context_length`` is each one's
    kv_cache_type: str = "f16"

    @property
    def devices(self) -> tuple[Device, ...]:
        """The devices that hold a part of the model (this CPU whenever it has a place, even with no layers: it
        holds the rest)."""
        return tuple(p.device for p in self.placements if p.layers or p.device.kind == "cpu")

    @property
    def cpu_only(self) -> bool:
        """Whether the model runs on this computer's CPU alone."""
        return all(d.kind == "cpu" for d in self.devices)

    @property
    def partly_on_gpu(self) -> bool:
        """Whether some layers run on NVIDIA GPUs and the others on this CPU."""
        return any(p.device.kind == "cuda" and p.layers for p in self.placements) and any(
            p.device.kind == "cpu" and p.layers for p in self.placements
        )

    @property
    def gpu_layers(self) -> int:
        """llama.cpp's ``n_gpu_layers`` for the layers on GPUs and workers."""
        offloaded = sum(p.layers for p in self.placements if p.device.offloads)
        return llama_gpu_layers(offloaded, sum(p.layers for p in self.placements))

    @property
    def tensor_split(self) -> tuple[float, ...]:
        """The layers on each GPU or worker, in llama.cpp's device order, when more than one device, or workers, share
        them (a worker always gets its count, even alone)."""
        offloading = [p for p in self.placements if p.device.offloads]
        if len(offloading) > 1 or any(p.device.kind == "worker" for p in offloading):
            return tuple(float(p.layers) for p in offloading)
        return ()

    @property
    def main_gpu(self) -> int:
        """The CUDA GPU holding the most layers (the first such, by number)."""
        gpus = [p for p in self.placements if p.device.kind == "cuda"]
        return max(gpus, key=lambda p: p.layers).device.index if gpus else 0

    @property
    def output_on_cpu(self) -> bool:
        """The output projection on this CPU while the layers are elsewhere (its placement says so)."""
        return any(p.output and p.device.kind == "cpu" for p in self.placements)

    @property
    def workers(self) -> tuple[str, ...]:
        """The addresses of the workers with a place in the plan, in the chain's order."""
        return tuple(p.device.address for p in self.placements if p.device.kind == "worker")

    def to_json(self) -> dict[str, Any]:
        """The plan as `hearth doctor --json` reports it: devices by their ids, llama.cpp's settings included."""
        fields = asdict(self)
        body = {"backend": fields.pop("backend"), "label": fields.pop("label")}
        body |= {"devices": [str(d) for d in self.devices]} | fields
        for placement, shown in zip(self.placements, body["placements"], strict=True):
            shown["device"] = str(placement.device)
        return body | {
            "gpu_layers": self.gpu_layers,
            "tensor_split": list(self.tensor_split),
            "main_gpu": self.main_gpu,
            "workers": list(self.workers),
            "output_on_cpu": self.output_on_cpu,
        }

    def load_options(
        self, seed: int = 0, cache_dir: str | None = None, worker_links: tuple[WorkerLink, ...] = ()
    ) -> LoadOptions:
        return LoadOptions(
            context_length=self.context_length,
            threads=self.threads,
            gpu_layers=self.gpu_layers,
            seed=seed,
            device=self.device,
            tensor_split=self.tensor_split,
            main_gpu=self.main_gpu,
            cache_dir=cache_dir,
            slots=self.slots,
            workers=self.workers,
            worker_links=worker_links,
            kv_cache_type=self.kv_cache_type,
            output_on_cpu=self.output_on_cpu,
        )


class NoBackend(BackendUnavailable):
    def __init__(self, rejections: Sequence[str]) -> None:
        super().__init__(
            "No backend can run this model here: " + "; ".join(rejections) + ".",
            "Choose another backend or device (Automatic picks one that works here), or another model.",
        )
        self.rejections = tuple(rejections)


@dataclass(frozen=True)
class PlanOption:
    rank: int
    plan: BackendPlan
    route: str = ""  # one of plan_reasons.ROUTES; "" for a backend automatic selection never weighs


@dataclass
class PlanContext:
    """Everything the per-backend policies share for one decision."""

    inventory: HardwareInventory
    model: ModelInfo
    prefs: Preferences
    context: int
    context_reason: str
    threads: int
    threads_reason: str
    slots: int = 1  # for backends that batch answers; the others always plan one
    rejections: list[str] = field(default_factory=list)
    not_used: list[str] = field(default_factory=list)  # why a faster device sits idle, shown with the plan
    memory_failures: list[DoesNotFit] = field(default_factory=list)
    route_notes: dict[str, str] = field(default_factory=dict)  # why a route gave no option, by route

    @property
    def kv_width(self) -> float:
        """Bytes per context-cache value for llama.cpp plans."""
        return KV_WIDTHS[self.prefs.kv_cache_type]

    def note(self, route: str, reason: str) -> None:
        self.route_notes.setdefault(route, reason)
