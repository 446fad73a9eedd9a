"""``hearth worker``: this machine's CPU (or one of its NVIDIA GPUs) served to llama.cpp over its RPC protocol, for
a Hearth that splits a model's layers across machines. llama.cpp's RPC server (no authentication, no encryption)
listens on a Unix socket in a folder only this account may enter, never on a TCP port; mains reach it through the
worker's port, a TLS link only paired mains may use, whose server hands their connections to that socket."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.terminal_text import for_terminal
from backends.local_socket import LocalSocket
from backends.workers.rpc import Endpoint
from models.shared.errors import HearthError
from models.shared.wording import plural

if TYPE_CHECKING:
    from app.worker_control import ControlServer
    from backends.hardware import GpuDevice
    from backends.workers.device import ServableDevice

EXIT_OK = 0
LISTEN_WAIT_S = 30.0


def run_worker(host: str, port: int, threads: int | None, data_dir: Path, device: str = "cpu") -> int:
    """Serve ``device`` (cpu or cuda:N) on ``host:port`` (the control port mains pair with) and llama.cpp's RPC on a
    private Unix socket of its own, printing the pairing code on a line of its own."""
    from app.cli.commands import ensure_port_free, exit_on_terminate
    from app.services.workers import local_versions
    from app.worker_control import ControlServer, load_tokens
    from backends.local_socket import SOCKET_NAME, private_folder, remove_folder
    from backends.workers.device import pick_device
    from backends.workers.pairing import WorkerFacts, WorkerState, new_code
    from backends.workers.rpc import servable_devices
    from backends.workers.secure_link import load_or_create_identity

    endpoint = Endpoint(host, port)
    served = pick_device(device, servable_devices(memory=False))  # a device that is not here: said before anything
    ensure_port_free(host, port)
    identity = load_or_create_identity(data_dir / "worker-identity")
    threads = threads or max((os.cpu_count() or 2) // 2, 1)
    sockets = private_folder("hearth-worker-")
    rpc = LocalSocket(sockets / SOCKET_NAME)
    cache_dir = data_dir / "cache" / "worker-tensors"
    child = subprocess.Popen(
        [
            *(sys.executable, "-m", "backends.workers.rpc_server"),
            *(str(rpc), str(cache_dir), str(threads), str(os.getpid()), device),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,  # llama.cpp's banner; Hearth says what matters below
        start_new_session=True,  # Ctrl+C reaches this process, which ends the server
    )
    previous = signal.signal(signal.SIGTERM, exit_on_terminate)  # `kill PID` stops the server too
    control: ControlServer | None = None
    try:
        _wait_listening(rpc, child)
        code = new_code()
        tokens_file = data_dir / "worker-paired.json"
        free_memory: Callable[[], int] = _free_memory
        if served.gpu:  # NVML's figures; without them (no driver library) mains count it as not measured
            gpu = _nvml_gpu(served)
            free_memory = functools.partial(_free_gpu_memory, gpu.index) if gpu else _not_measured
            speed, label = (gpu.memory_bytes_per_s if gpu else 0.0), served.label
        else:
            speed, label = _read_speed(threads), _device_name()
        facts = WorkerFacts(str(rpc), label, free_memory(), threads, *local_versions(), speed)
        state = WorkerState(code, identity.fingerprint, facts, load_tokens(tokens_file))
        control = ControlServer(host, port, state, identity, tokens_file, _announce_code, free_memory, _announce_pause)
        _new_codes_on_enter(control)
        what = f"{served.name} ({served.description})" if served.gpu else f"CPU ({plural(threads, 'thread')})"
        _print_banner(what, endpoint, code, identity.fingerprint, _speed_line(served.gpu, speed), cache_dir)
        # Not child.wait(): the system may hand `kill`'s SIGTERM to another thread (seen after a SIGSTOP and
        # SIGCONT), and a main thread blocked in waitpid would then never run the handler that ends the worker.
        while (status := child.poll()) is None:
            time.sleep(0.5)
        raise HearthError(
            f"The worker's server ended by itself (status {status}).", "Start it again; `hearth -v worker` says more."
        )
    except KeyboardInterrupt:
        print("\nWorker stopped.", file=sys.stderr)
        return EXIT_OK
    finally:
        signal.signal(signal.SIGTERM, previous)
        if control is not None:
            control.close()
        if child.poll() is None:
            child.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)
            if child.poll() is None:
                child.kill()
                child.wait()
        remove_folder(sockets)


def _print_banner(what: str, endpoint: Endpoint, code: str, fingerprint: str, speed: str, cache_dir: Path) -> None:
    """What the worker serves, its pairing code and what to type on the main, and where it keeps tensors."""
    print(f"Hearth worker: serving this machine's {what} on {endpoint} (Ctrl+C to stop).", flush=True)
    print(f"pairing code: {code}", flush=True)
    print(f"  On the main machine: hearth workers add {endpoint} --code {code}", flush=True)
    print(f"  Certificate fingerprint: {fingerprint[:16]}… (mains pin it when they pair).", flush=True)
    print("  Press Enter here for a new code at any time.", flush=True)
    print(f"  {speed}", flush=True)
    if not endpoint.loopback:
        print(
            f"  Reachable from other machines on {endpoint.host}: only paired mains are served, over TLS.", flush=True
        )
    print(f"  Tensors clients send are kept in {for_terminal(str(cache_dir))}.", flush=True)


def _announce_code(code: str) -> None:
    print("The last code is used up (a main paired with it, or gave a wrong one); the next main needs this one:")
    print(f"pairing code: {code}", flush=True)


def _announce_pause() -> None:
    print(
        "Pairing is paused: several wrong pairing codes came in (mains that give one wait a while before they may "
        "try again). Press Enter here for a new code.",
        flush=True,
    )


def _new_codes_on_enter(control: ControlServer) -> None:
    """Each line typed in the worker's terminal (Enter) draws a new code, ending a pause."""

    def read() -> None:
        with contextlib.suppress(OSError, ValueError):
            for _ in sys.stdin:
                print(f"pairing code: {control.renew_code()}", flush=True)

    threading.Thread(target=read, name="worker-new-code", daemon=True).start()


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _speed_line(gpu: bool, speed: float) -> str:
    if not gpu:
        return f"Memory reads at {speed / 1e9:.1f} GB/s with its threads (mains weigh its layers by it)."
    if speed > 0:
        peak = f"{speed / 1e9:.0f} GB/s"
        return f"Memory reads at up to {peak} (the GPU's peak, per its driver; mains weigh its layers by it)."
    return "The GPU's memory speed is unknown (its driver did not say): mains count it at the mean of the others."


def _nvml_gpu(served: ServableDevice) -> GpuDevice | None:
    """The GPU as NVML sees it (free memory, peak memory speed): the one of the same name, or at the same index
    among those when several have it (CUDA and NVML may number them differently; same-named GPUs are alike)."""
    from backends.hardware import nvidia_gpus

    gpus = nvidia_gpus()
    named = [g for g in gpus if g.name == served.description]
    number = served.name.removeprefix("CUDA")
    index = int(number) if number.isdigit() else 0
    if named:
        return named[min(index, len(named) - 1)]
    return gpus[index] if index < len(gpus) else None


def _not_measured() -> int:
    return 0


def _free_gpu_memory(index: int) -> int:
    from backends.hardware import nvidia_gpus

    return next((g.free_bytes for g in nvidia_gpus() if g.index == index), 0)


def _device_name() -> str:
    from backends.hardware import probe

    return f"CPU: {probe().cpu_model}"


def _read_speed(threads: int) -> float:
    """This machine's memory read speed with ``threads``: the best of three reads (a slower one was something else
    wanting the memory), which mains weigh this worker's share of a model's layers by."""
    from backends.read_speed import WORKER_BYTES, read_bandwidth

    return max(read_bandwidth(threads, WORKER_BYTES, repeats=3))


def _free_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def _wait_listening(where: LocalSocket, child: subprocess.Popen[bytes]) -> None:
    from backends.local_socket import connect

    deadline = time.monotonic() + LISTEN_WAIT_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise HearthError(
                f"The worker's server could not start (status {child.returncode}).",
                "Check that this llama.cpp build has RPC (`hearth doctor` says); `hearth -v worker` says more.",
            )
        with contextlib.suppress(OSError):
            connect(where, 1.0).close()
            return
        time.sleep(0.1)
    raise HearthError("The worker's server did not start within 30 s.", "Start it again.")
