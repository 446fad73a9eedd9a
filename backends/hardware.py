"""Look at the machine. Every probe here has side effects and fails softly: a probe that cannot answer
records why in ``notes`` and the inventory carries on without that fact."""

from __future__ import annotations

import logging
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

# Flags worth reporting: they decide which llama.cpp kernels run and how fast.
INTERESTING_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx_vnni",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
    "neon",
    "asimd",
)


@dataclass(frozen=True)
class LlamaCppBuild:
    version: str
    ggml_backends: tuple[str, ...]  # compiled ggml backends, e.g. ("cpu", "rpc") or ("cpu", "cuda", "rpc")
    rpc: bool

    @property
    def gpu_offload(self) -> bool:
        """True only when a GPU backend is compiled in (llama.cpp's own check also counts RPC)."""
        return any(name in self.ggml_backends for name in ("cuda", "vulkan", "metal", "sycl", "hip", "opencl"))


@dataclass(frozen=True)
class HardwareInventory:
    cpu_model: str
    physical_cores: int
    logical_cores: int
    isa_flags: frozenset[str]
    ram_total_bytes: int
    ram_available_bytes: int
    os: str
    llama_cpp: LlamaCppBuild | None
    notes: tuple[str, ...] = field(default=())


def probe() -> HardwareInventory:
    notes: list[str] = []
    cpu_model, flags = _cpu_model_and_flags(notes)
    physical, logical, total, available = _cores_and_memory(notes)
    inventory = HardwareInventory(
        cpu_model=cpu_model,
        physical_cores=physical,
        logical_cores=logical,
        isa_flags=flags,
        ram_total_bytes=total,
        ram_available_bytes=available,
        os=f"{platform.system()} {platform.release()}",
        llama_cpp=_llama_cpp_build(notes),
        notes=tuple(notes),
    )
    for note in notes:
        log.warning("hardware probe: %s", note)
    return inventory


def _cpu_model_and_flags(notes: list[str]) -> tuple[str, frozenset[str]]:
    cpuinfo = Path("/proc/cpuinfo")
    model = platform.processor() or platform.machine()
    flags: set[str] = set()
    if not cpuinfo.exists():
        return model, frozenset()
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError as exc:
        notes.append(f"could not read /proc/cpuinfo: {exc}")
        return model, frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Processor", "cpu model") and value.strip():
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return model, frozenset(flag for flag in INTERESTING_FLAGS if flag in flags)


def _cores_and_memory(notes: list[str]) -> tuple[int, int, int, int]:
    import psutil

    logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    physical = psutil.cpu_count(logical=False)
    if not physical:
        notes.append("physical core count unknown; assuming the logical count")
        physical = logical
    memory = psutil.virtual_memory()
    return physical, logical, int(memory.total), int(memory.available)


def _llama_cpp_build(notes: list[str]) -> LlamaCppBuild | None:
    try:
        import llama_cpp
    except (ImportError, OSError) as exc:
        notes.append(f"llama-cpp-python is not usable: {exc}")
        return None
    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    names = sorted(
        {
            path.name.removeprefix("libggml-").split(".")[0]
            for path in lib_dir.glob("libggml-*")
            if not path.name.startswith("libggml-base")
        }
    )
    return LlamaCppBuild(
        version=str(llama_cpp.__version__),
        ggml_backends=tuple(names),
        rpc=bool(llama_cpp.llama_supports_rpc()),
    )


def describe(inventory: HardwareInventory) -> list[str]:
    """One line per device, the way users paste them into bug reports."""
    from backends.memory import format_bytes

    flags = " ".join(sorted(inventory.isa_flags)) or "none detected"
    lines = [
        f"CPU: {inventory.cpu_model} — {inventory.physical_cores} physical / {inventory.logical_cores} logical "
        f"cores; ISA: {flags}",
        f"RAM: {format_bytes(inventory.ram_available_bytes)} available of {format_bytes(inventory.ram_total_bytes)}",
    ]
    build = inventory.llama_cpp
    if build is None:
        lines.append("llama.cpp: not installed")
    else:
        lines.append(
            f"llama.cpp: llama-cpp-python {build.version}; ggml backends {', '.join(build.ggml_backends)}; "
            f"GPU offload {'yes' if build.gpu_offload else 'no'}; RPC {'yes' if build.rpc else 'no'}"
        )
    return lines
