"""llama.cpp's RPC backend from Python: a worker serves this machine's device to llama.cpp in other processes or
on other machines; an engine adds the workers' devices to its own and llama.cpp splits a model's layers across them.

Both sides go through the shared libraries llama-cpp-python ships, opened by their versioned names
(``libggml.so.0``, ``libggml-rpc.so.0``): the unversioned names are other files to the loader, and a second copy of
ggml keeps a device registry of its own that llama.cpp never reads. ggml's RPC has no authentication and no
encryption, so Hearth never puts it on a TCP port, not even on loopback (which every account on the computer can
reach): servers and clients meet on Unix sockets in owner-only folders (``backends/local_socket.py``), an endpoint
llama.cpp takes as ``unix:PATH`` once built with Hearth's patch (``packaging/patches/``).
"""

from __future__ import annotations

import ctypes
import functools
import ipaddress
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from backends.local_socket import LocalSocket
from backends.workers.device import DEVICE_CPU, ServableDevice, pick_device
from models.shared.errors import HearthError

DEFAULT_PORT = 50052
_WRITE_IT = "Write the worker's address as HOST:PORT, for example 127.0.0.1:50052."
_attached: set[str] = set()
_attach_lock = threading.Lock()


class RpcUnavailable(HearthError):
    """This llama.cpp build has no RPC backend, or its libraries cannot be opened."""


class BadEndpoint(HearthError):
    """A worker address that is not HOST:PORT, or names a host Hearth will not expose RPC on."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_endpoint(text: str, default_port: int = DEFAULT_PORT) -> Endpoint:
    """``HOST:PORT``, ``HOST`` (the default port) or ``[IPv6]:PORT``."""
    text = text.strip()
    host, port_text = text, ""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    if not host:
        raise BadEndpoint(f"{text!r} names no host.", _WRITE_IT)
    if not port_text:
        return Endpoint(host, default_port)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise BadEndpoint(f"{text!r} has no valid port.", _WRITE_IT)
    return Endpoint(host, int(port_text))


@functools.cache
def _libraries() -> tuple[ctypes.CDLL, ctypes.CDLL]:
    try:
        import llama_cpp
    except ImportError as exc:
        raise RpcUnavailable(f"llama-cpp-python is not installed ({exc}).", "Run `make setup`.") from exc
    folder = Path(llama_cpp.__file__).resolve().parent / "lib"
    try:
        ggml = ctypes.CDLL(str(folder / "libggml.so.0"), mode=ctypes.RTLD_GLOBAL)
        rpc = ctypes.CDLL(str(folder / "libggml-rpc.so.0"), mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise RpcUnavailable(
            f"This llama.cpp build has no RPC backend ({exc}).",
            "Rebuild it with `make setup` (Hearth builds llama.cpp with GGML_RPC=ON).",
        ) from exc
    ggml.ggml_backend_dev_by_type.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
    ggml.ggml_backend_dev_buffer_type.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_buffer_type.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_dev_count.restype = ctypes.c_size_t
    ggml.ggml_backend_dev_count.argtypes = []
    ggml.ggml_backend_dev_get.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    for text in (ggml.ggml_backend_dev_name, ggml.ggml_backend_dev_description):
        text.restype = ctypes.c_char_p
        text.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_dev_type.restype = ctypes.c_int
    ggml.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_dev_memory.restype = None
    ggml.ggml_backend_dev_memory.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    ggml.ggml_backend_register.restype = None
    ggml.ggml_backend_register.argtypes = [ctypes.c_void_p]
    rpc.ggml_backend_rpc_start_server.restype = None
    rpc.ggml_backend_rpc_start_server.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_void_p),
    ]
    rpc.ggml_backend_rpc_add_server.restype = ctypes.c_void_p
    rpc.ggml_backend_rpc_add_server.argtypes = [ctypes.c_char_p]
    return ggml, rpc


def unix_sockets_patched() -> bool:
    """Whether this llama.cpp build takes ``unix:PATH`` endpoints (Hearth's patch, applied by ``make setup``)."""
    _, rpc = _libraries()
    return hasattr(rpc, "ggml_backend_rpc_unix_sockets")


def _require_unix_sockets() -> ctypes.CDLL:
    _, rpc = _libraries()
    if not unix_sockets_patched():
        raise RpcUnavailable(
            "This llama.cpp build cannot use private sockets for its RPC, and Hearth will not open it to every "
            "account on this computer.",
            "Rebuild it with `make setup` (it applies Hearth's patch to llama.cpp).",
        )
    return rpc


def servable_devices(memory: bool = True) -> tuple[ServableDevice, ...]:
    """The devices this process's llama.cpp has (the CPU, and each GPU it was built for), with their memory now
    (``memory=False``: without; asking a CUDA device's memory sets up a CUDA context in this process)."""
    return tuple(device for _, device in _devices(memory))


def _devices(memory: bool) -> list[tuple[int, ServableDevice]]:
    """Each of llama.cpp's devices: its handle, and what it is."""
    ggml, _ = _libraries()
    found = []
    for index in range(ggml.ggml_backend_dev_count()):
        handle = ggml.ggml_backend_dev_get(index)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        if memory:
            ggml.ggml_backend_dev_memory(handle, ctypes.byref(free), ctypes.byref(total))
        device = ServableDevice(
            name=(ggml.ggml_backend_dev_name(handle) or b"?").decode(errors="replace"),
            description=(ggml.ggml_backend_dev_description(handle) or b"").decode(errors="replace").strip(),
            kind=int(ggml.ggml_backend_dev_type(handle)),
            free_bytes=int(free.value),
            total_bytes=int(total.value),
        )
        found.append((handle, device))
    return found


def serve(where: LocalSocket, cache_dir: Path, threads: int, device: str = "cpu") -> None:
    """Serve one of this machine's devices (``device`` as `hearth worker --device` spells it) to llama.cpp clients
    on the Unix socket ``where`` (in a folder only this account may enter) until the process ends (it does not
    return). ``cache_dir`` keeps the tensors clients sent, so loading the same model again sends only their
    hashes."""
    rpc = _require_unix_sockets()
    handles = {device: handle for handle, device in _devices(memory=False)}
    chosen = pick_device(device, tuple(handles))
    cache_dir.mkdir(parents=True, exist_ok=True)
    devices = (ctypes.c_void_p * 1)(handles[chosen])
    rpc.ggml_backend_rpc_start_server(str(where).encode(), str(cache_dir).encode(), max(threads, 1), 1, devices)


class _TensorOverride(ctypes.Structure):
    """llama.cpp's ``llama_model_tensor_buft_override``: tensors whose name matches ``pattern`` go to ``buft``."""

    _fields_: ClassVar = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


# The output projection's weights: its own tensor, or the token embedding a tied model reuses for it (anchored:
# every layer has an ``attn_output.weight``)
OUTPUT_WEIGHTS = r"^(output|token_embd)\.weight$"


def output_on_cpu_overrides() -> ctypes.Array[_TensorOverride]:
    """The tensor overrides (a list ending in an empty one) that keep the output projection in this CPU's memory
    while the layers go to workers; llama.cpp then runs it here. Keep the array alive until the model is loaded."""
    ggml, _ = _libraries()
    cpu = ggml.ggml_backend_dev_by_type(DEVICE_CPU)
    if not cpu:
        raise RpcUnavailable("llama.cpp lists no CPU device.", "Rebuild it with `make setup`.")
    here = _TensorOverride(OUTPUT_WEIGHTS.encode(), ggml.ggml_backend_dev_buffer_type(cpu))
    return (_TensorOverride * 2)(here, _TensorOverride(None, None))


def attach_workers(sockets: tuple[LocalSocket, ...]) -> None:
    """Add the devices of the workers reached at ``sockets`` (each a relay's, or a worker's own on this machine) to
    this process's llama.cpp (once each): a model loaded with layers on GPUs afterwards may place them on these
    devices, in this order."""
    ggml, _ = _libraries()
    rpc = _require_unix_sockets()
    with _attach_lock:
        for where in sockets:
            key = str(where)
            if key in _attached:
                continue
            _check_listens(where)  # llama.cpp aborts the whole process on a worker it cannot reach
            registry = rpc.ggml_backend_rpc_add_server(key.encode())
            if not registry:
                raise RpcUnavailable(f"llama.cpp could not add the worker at {key}.", "Check that it is running.")
            ggml.ggml_backend_register(registry)
            _attached.add(key)


WORKER_CONNECT_S = 5.0


class WorkerUnreachable(HearthError):
    """A worker that does not accept a connection."""


def reachable(endpoint: Endpoint, timeout_s: float = 1.0) -> bool:
    """Whether something accepts connections at ``endpoint`` (a worker that died no longer does)."""
    try:
        _check_answers(endpoint, timeout_s)
    except WorkerUnreachable:
        return False
    return True


def _check_listens(where: LocalSocket, timeout_s: float = WORKER_CONNECT_S) -> None:
    from backends.local_socket import connect

    try:
        connect(where, timeout_s).close()
    except OSError as exc:
        raise WorkerUnreachable(
            f"Nothing answers at {where} ({exc.strerror or exc}).",
            "Start the worker again (or check that it runs), or leave it out.",
        ) from None


def _check_answers(endpoint: Endpoint, timeout_s: float = WORKER_CONNECT_S) -> None:
    try:
        with socket.create_connection((endpoint.host, endpoint.port), timeout=timeout_s):
            return
    except OSError as exc:
        raise WorkerUnreachable(
            f"The worker at {endpoint} does not answer ({exc.strerror or exc}).",
            "Start `hearth worker` there (or check the address), or leave that worker out.",
            page_remedy="Start Hearth's worker there (or check the address), or remove it under Workers.",
        ) from None
