"""`hearth worker` serves llama.cpp's RPC for real, and a main Hearth pairs with it (`hearth workers add` with the
code it printed): two paired workers on loopback hold the embedded model's layers, and greedy decoding gives the text a
single process gives, through llama.cpp directly and through Hearth's engine (over the workers' TLS links). A wrong or
used code, an unpaired or stopped worker, another worker behind a pinned address, a link that is not TLS or shows no
token, a port in use, and a worker killed mid-answer each get a clear message."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.services.answering.turn_settings import TurnSettings
from backends.local_socket import parse_local
from tests.e2e.conftest import free_port
from tests.helpers import run_hearth, start_worker, stop_process

pytestmark = pytest.mark.integration

GENERATE = """
import sys
from backends.llamacpp import buffers as llamacpp_buffers
from backends.local_socket import parse_local
from backends.workers.rpc import attach_workers
import llama_cpp

workers = tuple(parse_local(e) for e in sys.argv[2:])
if workers:
    attach_workers(workers)
with llamacpp_buffers.for_llama_class():
    llm = llama_cpp.Llama(
        sys.argv[1], n_ctx=256, n_threads=1, verbose=False, seed=0,
        n_gpu_layers=-1 if workers else 0, tensor_split=[1.0] * len(workers) if workers else None,
    )
out = llm("The three primary colours are", max_tokens=24, temperature=0.0)
print("TEXT:" + out["choices"][0]["text"].replace("\\n", "\\\\n"))
"""


def _generate(model: Path, *workers: str) -> str:
    ran = subprocess.run(
        [sys.executable, "-c", GENERATE, str(model), *workers],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    return next(line for line in ran.stdout.splitlines() if line.startswith("TEXT:"))


def _start_worker(home: Path, port: int) -> subprocess.Popen[str]:
    return start_worker(home, port, "--threads", "1")


def _pairing_code(process: subprocess.Popen[str], address: str) -> str:
    """What the worker printed on start: where it serves, then its pairing code on a line of its own."""
    assert process.stdout is not None
    serving = process.stdout.readline()
    assert f"serving this machine's CPU (1 thread) on {address}" in serving, serving
    code_line = process.stdout.readline()
    assert code_line.startswith("pairing code: "), code_line
    return code_line.removeprefix("pairing code: ").strip()


def _next_code(process: subprocess.Popen[str]) -> str:
    """The code a worker printed after its last one was used up."""
    assert process.stdout is not None
    while "code is used up" not in (line := process.stdout.readline()):
        assert line, "the worker ended without printing a new code"
    code_line = process.stdout.readline()
    assert code_line.startswith("pairing code: "), code_line
    return code_line.removeprefix("pairing code: ").strip()


_hearth = run_hearth


@dataclass
class Worker:
    address: str  # its control address (what `hearth workers add` takes)
    rpc: str  # its llama.cpp server's private socket (unix:PATH), as it told the main when paired
    process: subprocess.Popen[str]


def paired_workers(home: Path, started: list[Worker]) -> list[Worker]:
    """Two workers on loopback, started together, paired with the Hearth of ``home``: the first through
    `hearth workers add` as a user pairs one (its report checked), the second through the same book in this process.
    ``started`` holds each as soon as it runs, for the caller to stop whatever happens."""
    from app.services.workers import WorkerBook

    ports = [free_port(), free_port()]
    for port in ports:
        started.append(Worker(f"127.0.0.1:{port}", "", _start_worker(home, port)))
    codes = [_pairing_code(worker.process, worker.address) for worker in started]
    first, second = started
    added = _hearth(home, "workers", "add", first.address, "--code", codes[0], timeout=60)
    assert added.returncode == 0, added.stderr
    assert f"Paired with the worker at {first.address}" in added.stdout
    assert "1 threads (reads " in added.stdout and " GB/s)" in added.stdout  # measured at the worker's start
    book = WorkerBook(home / "workers.json")
    book.add(second.address, codes[1])
    rpc = {w.address: w.facts.rpc for w in book.paired()}
    return [Worker(w.address, rpc[w.address], w.process) for w in started]


def stop_workers(started: list[Worker]) -> None:
    """Each worker asked to end at once, then waited for (killed if SIGTERM has not ended it in 15 s: once seen after
    SIGSTOP)."""
    for worker in started:
        if worker.process.poll() is None:
            worker.process.terminate()
    for worker in started:
        stop_process(worker.process)


@pytest.fixture
def workers(isolated_home: Path) -> Iterator[list[Worker]]:
    """Two workers paired with the isolated Hearth, for a test that stops, hangs or replaces one of them."""
    started: list[Worker] = []
    try:
        yield paired_workers(isolated_home, started)
    finally:
        stop_workers(started)


@dataclass
class Pair:
    home: Path
    workers: list[Worker]
    alone: str  # `hearth chat`'s answer on this machine alone, the text a split must give


@pytest.fixture(scope="module")
def shared_pair(tmp_path_factory: pytest.TempPathFactory, embedded_model: Path) -> Iterator[Pair]:
    """Two paired workers for the tests that leave them running as they found them (a test that edits the book puts
    it back), with the single-process answer they are compared against."""
    home = tmp_path_factory.mktemp("shared-pair") / "hearth-home"
    started: list[Worker] = []
    try:
        with pytest.MonkeyPatch.context() as patch:  # as isolated_home does: no HEARTH_ setting from outside
            for key in [k for k in os.environ if k.startswith("HEARTH_")]:
                patch.delenv(key)
            patch.setenv("HEARTH_HOME", str(home))
            paired = paired_workers(home, started)
            alone = _chat(home, embedded_model)
        assert alone.returncode == 0 and len(alone.stdout.strip()) > 10, alone.stderr[-2000:]
        yield Pair(home, paired, alone.stdout)
    finally:
        stop_workers(started)


@contextmanager
def book_kept(home: Path) -> Iterator[Path]:
    """The workers' book, put back as it was after the test edited it."""
    book = home / "workers.json"
    kept = book.read_bytes()
    try:
        yield book
    finally:
        book.write_bytes(kept)


def test_two_workers_hold_the_layers_and_the_text_is_the_single_process_text(
    shared_pair: Pair, embedded_model: Path
) -> None:
    alone = _generate(embedded_model)
    split = _generate(embedded_model, *(w.rpc for w in shared_pair.workers))
    assert split == alone
    assert len(alone) > len("TEXT:") + 10
    cache = shared_pair.home / "cache" / "worker-tensors"
    assert any(cache.iterdir())  # the workers kept what they were sent, for the next load


def test_stopping_a_worker_stops_its_servers_and_the_list_says_it_is_offline(
    workers: list[Worker], isolated_home: Path
) -> None:
    listed = _hearth(isolated_home, "workers", "list", timeout=60)
    assert listed.returncode == 0
    lines = listed.stdout.splitlines()
    assert [line.split("\t")[:2] for line in lines] == [[w.address, "online"] for w in workers]
    assert all(" ms\t" in line and "bit/s\t" in line and "Hearth " in line for line in lines)

    stopped = workers[0]
    stopped.process.terminate()
    stopped.process.wait(timeout=15)
    host, port = stopped.address.rsplit(":", 1)
    socket_path = Path(stopped.rpc.removeprefix("unix:"))
    deadline = time.monotonic() + 10
    while _listening(host, int(port)) or socket_path.parent.exists():  # its control port, its RPC server's socket
        assert time.monotonic() < deadline, f"{stopped.address} or {socket_path} is still there after it stopped"
        time.sleep(0.2)
    listed = _hearth(isolated_home, "workers", "list", timeout=60)
    assert listed.stdout.splitlines()[0].startswith(f"{stopped.address}\toffline\tThe worker at {stopped.address}")

    removed = _hearth(isolated_home, "workers", "remove", stopped.address, timeout=60)
    assert removed.returncode == 0
    assert _hearth(isolated_home, "workers", "list", timeout=60).stdout.count("\n") == 1


def _listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


def test_a_wrong_code_or_a_port_that_is_not_a_worker_is_refused_with_what_to_do(isolated_home: Path) -> None:
    port = free_port()
    process = _start_worker(isolated_home, port)
    try:
        code = _pairing_code(process, f"127.0.0.1:{port}")
        wrong = "AAAA-AAAA" if code != "AAAA-AAAA" else "BBBB-BBBB"
        refused = _hearth(isolated_home, "workers", "add", f"127.0.0.1:{port}", "--code", wrong, timeout=60)
        assert refused.returncode == 1
        assert "Wrong or already used pairing code." in refused.stderr and "printed a new one" in refused.stderr
        code = _next_code(process)  # the wrong try ended the old one
        with socket.socket() as not_a_worker:
            not_a_worker.bind(("127.0.0.1", 0))
            not_a_worker.listen()
            other = not_a_worker.getsockname()[1]
            answered = _hearth(isolated_home, "workers", "add", f"127.0.0.1:{other}", "--code", code, timeout=60)
        # It accepts and never answers: a timeout, not a hang.
        assert answered.returncode == 1 and f"127.0.0.1:{other} does not answer (timed out)" in answered.stderr
        assert "No workers are paired" in _hearth(isolated_home, "workers", "list", timeout=60).stdout
        paired = _hearth(isolated_home, "workers", "add", f"127.0.0.1:{port}", "--code", code, timeout=60)
        assert paired.returncode == 0, paired.stderr  # the new code pairs
        again = _hearth(isolated_home, "workers", "add", f"127.0.0.1:{port}", "--code", code, timeout=60)
        assert again.returncode == 1 and "already used" in again.stderr  # once
    finally:
        process.terminate()
        process.wait(timeout=15)


def test_the_worker_port_speaks_only_tls_and_serves_rpc_only_to_a_paired_main(shared_pair: Pair) -> None:
    from app.services.workers import WorkerBook
    from backends.base import WorkerLink
    from backends.workers.link import open_rpc
    from backends.workers.secure_link import LinkRefused

    host, port = shared_pair.workers[0].address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as plain:
        plain.sendall(b'{"op": "ping"}\n')
        assert plain.recv(4096) == b""  # no answer in the clear: the handshake failed and the worker hung up
    paired = WorkerBook(shared_pair.home / "workers.json").paired()[0]
    assert paired.address == shared_pair.workers[0].address
    assert parse_local(paired.facts.rpc) is not None  # a private socket
    with pytest.raises(LinkRefused) as refused:
        open_rpc(WorkerLink(paired.address, paired.fingerprint, "not-the-token"))
    assert "is not paired with this worker" in refused.value.message
    open_rpc(paired.link).close()  # the token it was given works


def test_another_worker_at_a_paired_address_is_refused_by_its_certificate(
    workers: list[Worker], embedded_model: Path, isolated_home: Path, tmp_path: Path
) -> None:
    first = workers[0]
    first.process.terminate()
    first.process.wait(timeout=15)
    impostor = _start_worker(tmp_path / "elsewhere", int(first.address.rsplit(":", 1)[1]))  # a certificate of its own
    try:
        _pairing_code(impostor, first.address)
        listed = _hearth(isolated_home, "workers", "list", timeout=60)
        assert f"{first.address}\toffline\tThe worker at {first.address} showed another certificate" in listed.stdout
        refused = _chat(isolated_home, embedded_model, "--backend", "pipeline", "--worker", first.address)
        assert refused.returncode == 1 and "showed another certificate" in refused.stderr
        assert f"hearth workers remove {first.address}" in refused.stderr
    finally:
        impostor.terminate()
        impostor.wait(timeout=15)


def test_a_worker_refuses_a_port_in_use(isolated_home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = _hearth(isolated_home, "worker", "--port", str(port), timeout=60)
    assert busy.returncode == 1
    assert f"Cannot listen on 127.0.0.1:{port}" in busy.stderr


def test_a_worker_asked_for_a_device_it_lacks_says_what_it_has_before_serving(isolated_home: Path) -> None:
    from backends.workers.rpc import servable_devices

    names = ", ".join(d.name for d in servable_devices(memory=False))
    if any(d.gpu for d in servable_devices(memory=False)):
        pytest.fail("this test expects a llama.cpp without CUDA (the CPU build `make setup` makes here)")
    port = free_port()
    missing = _hearth(isolated_home, "worker", "--port", str(port), "--device", "cuda:0", timeout=60)
    assert missing.returncode == 1
    assert f"There is no cuda:0 here: this llama.cpp has no CUDA device (it lists {names})" in missing.stderr
    assert "--device cpu" in missing.stderr
    assert "pairing code" not in missing.stdout
    unknown = _hearth(isolated_home, "worker", "--port", str(port), "--device", "gpu", timeout=60)
    assert unknown.returncode == 1 and "Unknown device 'gpu'" in unknown.stderr
    with socket.socket() as probe:  # nothing was left listening
        probe.bind(("127.0.0.1", port))


def _chat(home: Path, model: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "chat",
            "--model",
            str(model),
            "--temperature",
            "0",
            "--max-tokens",
            "24",
            *flags,
            "Name three primary colours.",
        ],
        env={**os.environ, "HEARTH_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_hearth_answers_through_its_engine_with_the_layers_on_the_workers(
    shared_pair: Pair, embedded_model: Path
) -> None:
    home, workers = shared_pair.home, shared_pair.workers
    split = _chat(home, embedded_model, "--backend", "pipeline")  # every paired worker
    assert split.returncode == 0, split.stderr[-2000:]
    assert split.stdout == shared_pair.alone
    one = _chat(home, embedded_model, "--backend", "pipeline", "--worker", workers[1].address)
    assert one.returncode == 0 and one.stdout == shared_pair.alone, one.stderr[-2000:]
    plan = _hearth(home, "doctor", "--model", str(embedded_model), "--backend", "pipeline", timeout=120)
    assert plan.returncode == 0, plan.stderr
    said = "layers in proportion to each worker's measured memory read speed"
    assert said in plan.stdout and f"{workers[0].address} " in plan.stdout.split(said)[1]


def test_an_unpaired_or_stopped_worker_is_named_instead_of_an_abort(
    workers: list[Worker], embedded_model: Path, isolated_home: Path
) -> None:
    unknown = f"127.0.0.1:{free_port()}"
    refused = _chat(isolated_home, embedded_model, "--backend", "pipeline", "--worker", unknown)
    assert refused.returncode == 1
    assert f"The worker at {unknown} is not paired with this Hearth." in refused.stderr
    assert "hearth workers add" in refused.stderr
    workers[0].process.terminate()
    workers[0].process.wait(timeout=15)
    failed = _chat(isolated_home, embedded_model, "--backend", "pipeline")
    assert failed.returncode == 1
    assert f"The worker at {workers[0].address} does not answer" in failed.stderr
    assert "SIGABRT" not in failed.stderr


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "hung"])
def test_a_worker_killed_or_hung_mid_answer_ends_the_answer_naming_it_and_the_next_question_works_without_it(
    workers: list[Worker], embedded_model: Path, isolated_home: Path, how: signal.Signals
) -> None:
    # hung: stopped, its connections stay open and nothing comes back; the link's heartbeat cuts it
    from app.services.answering.chat import TurnSaved, TurnStarted
    from app.services.container import build_services
    from app.settings import load_settings
    from backends.base import GenerationParams, TextDelta
    from models.shared.errors import EngineStopped

    services = build_services(
        load_settings(model={"context_length": 1024}, backend={"name": "pipeline", "threads": 1})  # all paired
    )
    try:
        list(services.control.start())
        assert services.runtime.status.state == "ready"
        victim = workers[0].process.pid
        seen: list[object] = []
        long = GenerationParams(temperature=0.7, max_new_tokens=400, seed=3)
        with pytest.raises(EngineStopped) as caught:
            for event in services.chat.send(
                None, "Write a long story about the sea.", TurnSettings(long, "You tell stories.")
            ):
                seen.append(event)
                if sum(isinstance(e, TextDelta) for e in seen) == 10:
                    os.kill(victim, how)
        assert caught.value.message == f"Worker {workers[0].address} stopped; continuing without it."
        started = seen[0]
        assert isinstance(started, TurnStarted)
        stored = services.store.get(started.conversation_id).messages
        assert stored[-1].role == "assistant" and stored[-1].content  # what was written is kept

        deadline = time.monotonic() + 120
        while services.runtime.status.state != "ready" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert services.runtime.status.state == "ready", services.runtime.status
        assert services.runtime.choice is not None and services.runtime.choice.prefs.workers == (workers[1].address,)
        follow_up = list(
            services.chat.send(started.conversation_id, "And then?", TurnSettings(GenerationParams(0.0, 12), "s"))
        )
        assert isinstance(follow_up[-1], TurnSaved) and follow_up[-1].message.content
    finally:
        services.close()
        if how == signal.SIGSTOP:
            os.kill(workers[0].process.pid, signal.SIGCONT)  # so that it can be stopped as the others are


def test_two_mains_pair_with_one_worker_and_the_second_is_told_while_the_first_uses_it(
    isolated_home: Path, tmp_path: Path
) -> None:
    from app.services.workers import WorkerBook
    from backends.workers.link import open_rpc
    from backends.workers.secure_link import LinkRefused

    port = free_port()
    address = f"127.0.0.1:{port}"
    process = _start_worker(isolated_home, port)
    try:
        first = WorkerBook(tmp_path / "first.json").add(address, _pairing_code(process, address))
        second = WorkerBook(tmp_path / "second.json").add(address, _next_code(process))  # a code pairs once
        using = open_rpc(first.link)
        with pytest.raises(LinkRefused) as refused:
            open_rpc(second.link)
        busy = "This worker is serving another main Hearth now."
        assert refused.value.message == f"The worker at {address} refused: {busy}"
        also = open_rpc(first.link)  # the first main's own second connection is fine
        also.close()
        using.close()
        deadline = time.monotonic() + 10
        while True:  # the worker sees the first main's connections end
            try:
                open_rpc(second.link).close()
                break
            except LinkRefused:
                assert time.monotonic() < deadline, "the worker kept refusing after the first main was done"
                time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(timeout=15)


def test_a_worker_with_little_memory_holds_what_fits_and_this_cpu_the_rest_with_the_same_text(
    shared_pair: Pair, embedded_model: Path
) -> None:
    import json

    home, small_one = shared_pair.home, shared_pair.workers[1].address
    with book_kept(home) as book:
        paired = json.loads(book.read_text())
        small = next(entry for entry in paired if entry["address"] == small_one)
        small["facts"]["free_bytes"] = 842 << 20  # as a worker with little free memory would have reported it
        book.write_text(json.dumps(paired))
        doctor = _hearth(home, "doctor", "--backend", "pipeline", "--worker", small_one, timeout=120)
        assert "llama.cpp split across 1 worker and this CPU" in doctor.stdout, doctor.stdout + doctor.stderr
        assert "on this CPU (the workers cannot hold them)" in doctor.stdout
        split = _chat(home, embedded_model, "--backend", "pipeline", "--worker", small_one)
    assert split.returncode == 0, split.stderr[-2000:]
    assert split.stdout == shared_pair.alone


def test_a_worker_that_accepts_and_never_answers_is_named_within_the_timeout_not_waited_on(
    workers: list[Worker], embedded_model: Path, isolated_home: Path
) -> None:
    hung = workers[0].process.pid
    os.kill(hung, signal.SIGSTOP)  # the system still accepts connections for it; nothing answers
    try:
        refused = _chat(isolated_home, embedded_model, "--backend", "pipeline")  # _chat's own limit: no hang
        assert refused.returncode == 1
        assert f"The worker at {workers[0].address} does not answer (timed out)" in refused.stderr
    finally:
        os.kill(hung, signal.SIGCONT)


def test_the_list_reads_each_workers_free_memory_now_and_measures_bandwidth_only_when_asked(shared_pair: Pair) -> None:
    with book_kept(shared_pair.home) as book:
        _list_reads_and_measures(book, shared_pair.home, shared_pair.workers)


def _list_reads_and_measures(book: Path, isolated_home: Path, workers: list[Worker]) -> None:
    import json

    from backends.workers.link import open_rpc

    stale, slow = 1 << 20, 1000.0  # what a worker with 1 MiB free reported at pairing, and a 8 kbit/s link
    entries = json.loads(book.read_text())
    for entry in entries:
        entry["facts"]["free_bytes"], entry["bandwidth_bytes_per_s"] = stale, slow
    book.write_text(json.dumps(entries))

    from app.services.workers import WorkerBook

    first = WorkerBook(book).paired()[0]
    serving = open_rpc(first.link)  # this main uses the first worker now
    try:
        listed = _hearth(isolated_home, "workers", "list", timeout=60)
    finally:
        serving.close()
    assert listed.returncode == 0, listed.stderr
    assert "\t1 MiB free" not in listed.stdout  # both say what they have free now
    assert listed.stdout.count("8.0 kbit/s") == 2  # the link speeds kept from before: not measured on every look
    kept = {entry["address"]: entry for entry in json.loads(book.read_text())}
    assert kept[first.address]["facts"]["free_bytes"] == stale  # serving: its free memory leaves out what it holds
    assert kept[workers[1].address]["facts"]["free_bytes"] > stale  # written back for the planner
    measured = _hearth(isolated_home, "workers", "list", "--measure", timeout=60)
    assert measured.returncode == 0 and "8.0 kbit/s" not in measured.stdout
    assert all(entry["bandwidth_bytes_per_s"] > slow for entry in json.loads(book.read_text()))


def test_a_worker_killed_while_the_model_loads_is_left_out_and_the_model_loads_on_the_others(
    workers: list[Worker], isolated_home: Path
) -> None:
    from app.services.container import build_services
    from app.settings import load_settings
    from backends.base import GenerationParams, TextDelta

    services = build_services(
        load_settings(model={"context_length": 1024}, backend={"name": "pipeline", "threads": 1})  # all paired
    )
    try:
        said = []
        for step in services.control.start():
            said.append(step.message)
            if step.fraction >= 0.9 and workers[0].process.poll() is None:  # its layers are there now
                workers[0].process.kill()
                workers[0].process.wait(timeout=15)
        assert f"Worker {workers[0].address} stopped while loading; loading on llama.cpp split across 1 worker" in said
        assert services.runtime.status.state == "ready", services.runtime.status
        assert services.runtime.choice is not None and services.runtime.choice.prefs.workers == (workers[1].address,)
        answer = services.chat.send(None, "Name a colour.", TurnSettings(GenerationParams(0.0, 8), "Be brief."))
        assert "".join(e.text for e in answer if isinstance(e, TextDelta)).strip()
    finally:
        services.close()
