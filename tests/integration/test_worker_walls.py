"""What another account on the same computer can do to a worker and to a main that uses it, tried for real
as that account (``setpriv`` to a throwaway unprivileged one, as ``test_page_owner.py`` does):

- llama.cpp's RPC, through any port or socket the worker's or the main's processes listen on: refused (a plain ggml
  RPC client, the one the review used, gets no device), while the owner's own client reaches the worker's server;
- wrong pairing codes in a loop: they burn at most a code per wait, and the owner pairs with the code printed;
- the control port: requests that are not one flat object get one line back and no traceback; hundreds of
  connections that trickle bytes hold a bounded number of threads and are cut after the deadline;
- a worker whose llama.cpp server another connection holds is named within a deadline instead of hanging the load.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from app.services.answering.turn_settings import TurnSettings
from app.services.container import Services
from app.services.workers import PairedWorker
from app.worker_control import MAX_STRANGERS, STRANGER_S, STRANGERS_PER_SOURCE
from tests.e2e.conftest import free_port
from tests.helpers import run_hearth

pytestmark = pytest.mark.integration

# A plain ggml RPC client over ctypes: prints DEVICES n when llama.cpp's RPC at the endpoint answered. llama.cpp
# aborts the process on an endpoint that does not speak its protocol; that, a refusal or a hang is "not used".
PROBE = r"""
import ctypes, socket, sys
folder, target = sys.argv[1], sys.argv[2]
if target.startswith("unix:"):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(target[5:])
    except OSError as exc:
        print("REFUSED", exc.errno, flush=True)
        sys.exit(0)
    s.close()
ggml = ctypes.CDLL(folder + "/libggml.so.0", mode=ctypes.RTLD_GLOBAL)
rpc = ctypes.CDLL(folder + "/libggml-rpc.so.0", mode=ctypes.RTLD_GLOBAL)
rpc.ggml_backend_rpc_add_server.restype = ctypes.c_void_p
rpc.ggml_backend_rpc_add_server.argtypes = [ctypes.c_char_p]
ggml.ggml_backend_reg_dev_count.restype = ctypes.c_size_t
ggml.ggml_backend_reg_dev_count.argtypes = [ctypes.c_void_p]
registry = rpc.ggml_backend_rpc_add_server(target.encode())
print("DEVICES", ggml.ggml_backend_reg_dev_count(registry) if registry else 0, flush=True)
"""

# Wrong pairing proofs as fast as one connection allows, for a few seconds: how many were answered at all.
JAM = r"""
import json, os, socket, ssl, sys, time
host, port, version, llama = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
sent, stop = 0, time.monotonic() + float(sys.argv[5])
while time.monotonic() < stop:
    with context.wrap_socket(socket.create_connection((host, port), timeout=10)) as link:
        reader = link.makefile("rb")
        while time.monotonic() < stop:
            request = {"op": "pair", "version": version, "llama_cpp": llama, "nonce": os.urandom(16).hex(),
                       "proof": os.urandom(32).hex()}
            link.sendall((json.dumps(request) + "\n").encode())
            if not reader.readline():
                break
            sent += 1
print(sent)
"""


# Connections that never finish their TLS hello, held open until stdin closes: how many the worker let stay open.
HOLD = r"""
import socket, sys, time
host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held = []
for _ in range(count):
    try:
        connection = socket.create_connection((host, port), timeout=5)
        connection.sendall(b"\x16")
        held.append(connection)
    except OSError:
        pass
time.sleep(1.0)
alive = 0
for connection in held:
    connection.setblocking(False)
    try:
        alive += connection.recv(1) != b""
    except BlockingIOError:
        alive += 1  # nothing to read and not closed: still held
    except OSError:
        pass
print(alive, flush=True)
sys.stdin.read()
"""


@pytest.fixture(scope="module")
def ggml_libraries() -> Iterator[Path]:
    """llama.cpp's libraries where the other account can read them (the venv may sit under root's home)."""
    import tempfile

    import llama_cpp

    folder = Path(tempfile.mkdtemp(prefix="hearth-ggml-"))
    for library in (Path(llama_cpp.__file__).parent / "lib").glob("*.so*"):
        shutil.copy(library, folder / library.name)
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _probe(target: str, libraries: Path, as_account: tuple[int, int] | None) -> str:
    prefix = [] if as_account is None else ["setpriv", f"--reuid={as_account[0]}", f"--regid={as_account[1]}"]
    prefix += ["--clear-groups"] if as_account is not None else []
    try:
        ran = subprocess.run(
            [*prefix, "/usr/bin/python3", "-c", PROBE, str(libraries), target],
            capture_output=True,
            text=True,
            timeout=30,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
        )
    except subprocess.TimeoutExpired:
        return "hung"
    said = [line for line in ran.stdout.splitlines() if line.startswith(("DEVICES", "REFUSED"))]
    return said[-1] if said else f"ended ({ran.returncode})"


def _used(outcome: str) -> bool:
    return outcome.startswith("DEVICES") and outcome != "DEVICES 0"


def _listening(pid: int) -> list[str]:
    """Every TCP port and Unix socket the process ``pid`` and its descendants listen on, as ggml endpoints."""
    found: list[str] = []
    tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    for process in tree:
        try:
            inet = process.net_connections(kind="inet")
            unix = process.net_connections(kind="unix")
        except psutil.Error:
            continue
        for connection in inet:
            if connection.status == psutil.CONN_LISTEN:
                host = "127.0.0.1" if connection.laddr.ip in ("0.0.0.0", "::", "::1") else connection.laddr.ip
                found.append(f"{host}:{connection.laddr.port}")
        found += [f"unix:{c.laddr}" for c in unix if isinstance(c.laddr, str) and c.laddr.startswith("/")]
    return sorted(set(found))


def _start_worker(home: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app", "worker", "--port", str(port), "--threads", "1"],
        env={**os.environ, "HEARTH_HOME": str(home)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _first_code(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    while not (line := process.stdout.readline()).startswith("pairing code: "):
        assert line, "the worker ended before printing a code"
    return line.removeprefix("pairing code: ").strip()


def _stop(process: subprocess.Popen[str]) -> str:
    process.terminate()
    try:
        _, err = process.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
    return err


@pytest.fixture
def paired(isolated_home: Path) -> Iterator[PairedWorker]:
    """A real `hearth worker` on loopback, paired with the isolated Hearth."""
    from app.services.workers import WorkerBook

    port = free_port()
    worker = _start_worker(isolated_home / "worker", port)
    try:
        yield WorkerBook(isolated_home / "workers.json").add(f"127.0.0.1:{port}", _first_code(worker))
    finally:
        _stop(worker)


def _split_services(model: Path) -> Services:
    """The isolated Hearth with ``model`` split across every paired worker (not started yet)."""
    from app.services.container import build_services
    from app.settings import load_settings

    return build_services(
        load_settings(model={"path": str(model), "context_length": 512}, backend={"name": "pipeline"})
    )


def test_no_other_account_reaches_llama_cpp_rpc_through_a_worker_or_a_main_using_it(
    paired: PairedWorker, embedded_model: Path, other_account: tuple[int, int], ggml_libraries: Path
) -> None:
    own = _probe(paired.facts.rpc, ggml_libraries, None)
    assert own == "DEVICES 1", own  # the probe works: the owner's client reaches the worker's server
    services = _split_services(embedded_model)
    try:
        list(services.control.start())
        assert services.runtime.status.state == "ready" and services.runtime.status.engine_pid
        targets = _listening(os.getpid())  # this main (the test's process), its engine, and the worker
        assert any(t.startswith("unix:") and "hearth-relay-" in t for t in targets), targets  # the main's relay
        assert any(t == paired.facts.rpc for t in targets), targets  # the worker's llama.cpp server
        outcomes = {target: _probe(target, ggml_libraries, other_account) for target in targets}
        assert not any(_used(outcome) for outcome in outcomes.values()), outcomes
        for target, outcome in outcomes.items():
            if target.startswith("unix:"):
                assert outcome.startswith("REFUSED"), (target, outcome)  # it cannot even connect
        # and the main, unharmed, still answers through the worker
        from backends.base import GenerationParams, TextDelta

        answer = services.chat.send(None, "Name a colour.", TurnSettings(GenerationParams(0.0, 8), "Be brief."))
        assert "".join(e.text for e in answer if isinstance(e, TextDelta)).strip()
    finally:
        services.close()


def test_unpaired_addresses_are_never_used_as_llama_cpp_rpc(isolated_home: Path, embedded_model: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:  # something listening, as a raw RPC server would
        raw = f"127.0.0.1:{listener.getsockname()[1]}"
        refused = run_hearth(
            isolated_home, "chat", "--model", str(embedded_model), "--backend", "pipeline", "--worker", raw, "Hi."
        )
    assert refused.returncode == 1
    assert f"The worker at {raw} is not paired with this Hearth." in refused.stderr


def test_wrong_codes_in_a_loop_from_another_account_do_not_stop_the_owner_pairing(
    isolated_home: Path, other_account: tuple[int, int]
) -> None:
    from app.services.workers import WorkerBook, local_versions

    port = free_port()
    worker = _start_worker(isolated_home / "worker", port)
    try:
        _first_code(worker)
        version, llama = local_versions()
        jam = subprocess.run(
            [
                *("setpriv", f"--reuid={other_account[0]}", f"--regid={other_account[1]}", "--clear-groups"),
                *("/usr/bin/python3", "-c", JAM, "127.0.0.1", str(port), version, llama, "5"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
        )
        assert jam.returncode == 0, jam.stderr
        assert int(jam.stdout) > 100  # it did send them, and each got an answer
        worker.stdin.write("\n")  # type: ignore[union-attr]  # the owner asks for a new code
        worker.stdin.flush()  # type: ignore[union-attr]
        assert worker.stdout is not None
        burnt, previous = 0, ""
        while True:  # the codes the wrong tries used up, each announced, then the one the owner asked for
            line = worker.stdout.readline()
            assert line, "the worker ended"
            if line.startswith("pairing code: ") and not previous.startswith("The last code is used up"):
                code = line.removeprefix("pairing code: ").strip()
                break
            burnt += line.startswith("The last code is used up")
            previous = line
        assert 1 <= burnt <= 3  # hundreds of wrong tries, a code burnt per wait: not one per try
        paired = WorkerBook(isolated_home / "workers.json").add(f"127.0.0.1:{port}", code)
        assert paired.address == f"127.0.0.1:{port}"
    finally:
        _stop(worker)


def test_the_control_port_answers_malformed_requests_in_one_line_and_cuts_trickling_strangers(
    isolated_home: Path,
) -> None:
    port = free_port()
    worker = _start_worker(isolated_home / "worker", port)
    try:
        _first_code(worker)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        for line in (b"[]", b"1", b'"op"', b"[" * 2000 + b"]" * 2000, b"{nope"):
            with context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10)) as link:
                link.sendall(line + b"\n")
                reply = json.loads(link.makefile("rb").readline())
                assert "JSON object per line" in reply["error"], (line[:10], reply)

        threads_before = psutil.Process(worker.pid).num_threads()
        trickling = []
        for _ in range(300):  # each sends one byte of a TLS hello now and then, never finishing it
            connection = socket.create_connection(("127.0.0.1", port), timeout=10)
            connection.sendall(b"\x16")
            trickling.append(connection)
        time.sleep(1.0)
        assert psutil.Process(worker.pid).num_threads() <= threads_before + MAX_STRANGERS + 2
        time.sleep(STRANGER_S + 2)
        for connection in trickling:
            with pytest.raises((ConnectionResetError, BrokenPipeError, TimeoutError, OSError)):
                connection.sendall(b"\x03")
                if connection.recv(1) == b"":
                    raise ConnectionResetError("closed by the worker")
            connection.close()
        # the port serves again
        with context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10)) as link:
            link.sendall(b'{"op": "ping"}\n')
            assert json.loads(link.makefile("rb").readline()) == {"pong": True}
    finally:
        err = _stop(worker)
    assert "Traceback" not in err and "RecursionError" not in err and "AttributeError" not in err, err[-2000:]


def test_a_worker_held_by_another_connection_is_named_and_the_load_goes_on_without_it(
    paired: PairedWorker, embedded_model: Path
) -> None:
    from backends.workers.link import open_rpc

    holding = open_rpc(paired.link)  # a stale connection of this same main: the server serves it, and waits
    services = _split_services(embedded_model)
    try:
        said = [step.message for step in services.control.start()]
        held = f"Worker {paired.address} did not answer (its server was held by another connection) while loading"
        assert any(held in message for message in said), said
        assert services.runtime.status.state == "ready", services.runtime.status  # on this machine alone
    finally:
        holding.close()
        services.close()


def test_strangers_from_another_account_cannot_crowd_out_a_paired_main(
    paired: PairedWorker, other_account: tuple[int, int]
) -> None:
    from app.worker_control import ask
    from backends.workers.link import Pulse
    from backends.workers.rpc import parse_endpoint

    where = parse_endpoint(paired.address)
    holder = subprocess.Popen(
        [
            *("setpriv", f"--reuid={other_account[0]}", f"--regid={other_account[1]}", "--clear-groups"),
            *("/usr/bin/python3", "-c", HOLD, where.host, str(where.port), str(MAX_STRANGERS + 8)),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    try:
        assert holder.stdout is not None
        held = int(holder.stdout.readline())
        assert held == STRANGERS_PER_SOURCE  # the rest were closed on arrival
        # the owner's account still gets in, as a stranger first and then as the paired main it is
        for _ in range(STRANGERS_PER_SOURCE + 2):
            reply, _ = ask((where.host, where.port), {"op": "info", "token": paired.token}, paired.fingerprint)
            assert "facts" in reply, reply
        pulse = Pulse(paired.link)
        try:
            assert all(pulse.ping(5.0) for _ in range(3))
        finally:
            pulse.close()
    finally:
        holder.communicate("", timeout=30)
