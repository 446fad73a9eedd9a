"""What a benchmark round costs besides time: energy (Intel RAPL's CPU packages, NVML's NVIDIA GPUs, where the
machine exposes them), the CPU time of each process that computes part of a token, and the bytes that crossed the
workers' ports (the kernel's TCP counters). Read before and after a round; a counter the machine lacks reads as
None or 0, and the report says what could not be measured.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RAPL = Path("/sys/class/powercap")


@dataclass(frozen=True)
class Stage:
    """A process that computes part of each token: this machine's engine, or a worker's llama.cpp server. Its CPU
    time over a round, divided by its threads, is how long it was computing; the stages' busy times added up and
    divided by the round's time say how much they overlapped (1: one stage at a time, as one answer's layers run;
    more: several computing at once)."""

    name: str
    pid: int
    threads: int


def worker_io(endpoints: Sequence[str]) -> int:
    """Bytes the workers have sent and received so far on the open connections of their control ports, which
    carry the RPC traffic through the links (the kernel's TCP counters, read with iproute2's ``ss``; RPC traffic
    goes through send/recv, which per-process I/O counters do not see)."""
    ports = {endpoint.rsplit(":", 1)[1] for endpoint in endpoints}
    if not ports:
        return 0
    try:
        listed = subprocess.run(
            ["ss", "-tinH", "state", "established"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return tcp_bytes(listed, ports)


def tcp_bytes(listed: str, ports: set[str]) -> int:
    """The bytes sent and received on the connections of ``ss -tinH`` output whose local port is in ``ports``."""
    total, counting = 0, False
    for line in listed.splitlines():
        if not line.startswith(
            (" ", "\t")
        ):  # a connection: state-less with -H and a state filter: Recv-Q Send-Q local peer
            fields = line.split()
            local = fields[2] if len(fields) > 2 else ""
            counting = local.rsplit(":", 1)[-1] in ports
        elif counting:
            for item in line.split():
                name, _, value = item.partition(":")
                if name in ("bytes_sent", "bytes_received") and value.isdigit():
                    total += int(value)
    return total


def energy_source() -> str:
    zones = sorted(RAPL.glob("intel-rapl:[0-9]*/energy_uj")) if RAPL.is_dir() else []
    readable = [z for z in zones if os.access(z, os.R_OK)]
    sources = [f"RAPL ({', '.join(z.parent.name for z in readable)})"] if readable else []
    gpus = _nvml_energy_counters()
    if gpus:
        sources.append(f"NVML ({len(gpus)} NVIDIA GPU{'s' if len(gpus) != 1 else ''})")
    if sources:
        return " + ".join(sources)
    return (
        "cannot measure energy here: no readable RAPL counters under /sys/class/powercap and no NVIDIA GPU "
        "reporting its energy"
    )


def energy_j() -> float | None:
    """Joules so far by every counter the machine exposes (RAPL's CPU packages, NVML's GPUs), or None."""
    zones = (
        [z for z in sorted(RAPL.glob("intel-rapl:[0-9]*/energy_uj")) if os.access(z, os.R_OK)] if RAPL.is_dir() else []
    )
    gpus = _nvml_energy_counters()
    if not zones and not gpus:
        return None
    try:
        cpu = sum(int(z.read_text()) for z in zones) / 1e6
    except OSError:
        return None
    return cpu + sum(read() for read in gpus) / 1e3


def _nvml_energy_mj(handle: Any) -> int:
    import pynvml

    return int(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))


def _nvml_energy_counters() -> list[Callable[[], int]]:
    """Readers of each NVIDIA GPU's energy since the driver loaded (millijoules), where NVML reports it."""
    try:
        import pynvml

        pynvml.nvmlInit()
        readers: list[Callable[[], int]] = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)  # refused on GPUs older than Volta
            readers.append(functools.partial(_nvml_energy_mj, handle))
        return readers
    except Exception:  # no driver, no GPU, or no energy counter: RAPL alone, or no figure
        return []


def cpu_seconds(stages: Sequence[Stage]) -> list[float]:
    """Each stage's CPU time so far (user and system), its child processes' included: a `hearth worker` computes
    in the llama.cpp server it started."""
    import psutil

    seconds = []
    for stage in stages:
        try:
            process = psutil.Process(stage.pid)
            times = [p.cpu_times() for p in (process, *process.children(recursive=True))]
            seconds.append(sum(t.user + t.system for t in times))
        except psutil.Error:
            seconds.append(0.0)
    return seconds
