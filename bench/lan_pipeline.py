"""A model split onto a worker across a network, simulated on this machine: the worker runs in a network namespace of
its own (its own network stack, reached at 10.77.0.2 through the TLS link, never loopback) behind a veth pair shaped
with `tc` (tbf for bandwidth; netem for delay and loss where the kernel has it). Where it lacks netem, delay and loss
go through `bench/tun_link.py` instead: a TUN device on each side and a process that carries each packet after the
delay or drops it, so TCP still meets real delay and loss. For each link: the round trip and bandwidth Hearth
measured through it, decode tokens/s for one user over several rounds, whether the greedy text is the one this
machine writes alone, and the network cost per token Hearth's planner predicts for that link, against the cost the
rounds show (the split's time per token minus the unshaped link's of the same kind). One process on this machine is
measured in the same run. Last, the link is cut in the middle of an answer: how long until the answer ends naming
the worker, and whether the next question is answered without it.

Needs root (ip netns, tc). Run alone on a quiet machine:

    sudo .venv/bin/python bench/lan_pipeline.py --json bench/data/pipeline-lan.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from app.services.answering.turn_settings import TurnSettings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NAMESPACE = "hearth-lan-bench"
MAIN_END, WORKER_END = "hlan0", "hlan1"
MAIN_IP, WORKER_IP = "10.77.0.1", "10.77.0.2"
PORT = 50052


@dataclass(frozen=True)
class Link:
    name: str
    rate: str | None = None  # tc's spelling: 1gbit, 100mbit
    # tbf's bucket: as small as the rate allows (rate / HZ), so that it does not hide a token's bytes the way a
    # bucket larger than them would (the bytes would cross at the veth's speed and the bucket refill meanwhile)
    burst: str = "16kb"
    delay_ms: float | None = None  # round trip, half each way
    loss: float = 0.0  # share of packets lost each way

    @property
    def needs_netem(self) -> bool:
        return self.delay_ms is not None or self.loss > 0


LINKS = (
    Link("veth, unshaped"),
    Link("1 Gbit/s", rate="1gbit", burst="128kb"),
    Link("100 Mbit/s", rate="100mbit"),
    Link("0.1 ms", delay_ms=0.1),
    Link("1 ms", delay_ms=1.0),
    Link("5 ms", delay_ms=5.0),
    Link("1% loss", loss=0.01),
    Link("5% loss", loss=0.05),
)
# where netem is missing, the delays and losses go through the user-space link, measured unshaped first
TUN_BASE = Link("TUN, unshaped", delay_ms=0.0)
VETH, TUN = "veth", "user-space TUN link"


@dataclass
class Result:
    link: str
    carrier: str = VETH
    skipped: str = ""
    round_trip_ms: float = 0.0
    bits_per_s: float = 0.0
    tokens_per_s: list[float] = field(default_factory=list)
    ms_per_token: float = 0.0
    predicted_network_ms: float = 0.0
    measured_network_ms: float | None = None
    same_text: bool | None = None


@dataclass
class Cut:
    """The link cut while an answer is written."""

    carrier: str
    ended_after_s: float = 0.0  # from the cut to the answer's end
    message: str = ""
    next_answer: str = ""
    next_plan_workers: list[str] = field(default_factory=list)
    error: str = ""


def sh(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=check)


def netem_available() -> str:
    """Empty when netem works here, else why not."""
    sh("ip", "link", "add", "hlanprobe0", "type", "veth", "peer", "name", "hlanprobe1")
    try:
        tried = sh("tc", "qdisc", "add", "dev", "hlanprobe0", "root", "netem", "delay", "1ms", check=False)
        return "" if tried.returncode == 0 else f"netem is not in this kernel ({tried.stderr.strip()})"
    finally:
        sh("ip", "link", "del", "hlanprobe0", check=False)


@contextlib.contextmanager
def namespace(link: Link, carrier: str) -> Iterator[subprocess.Popen[str] | None]:
    """The worker's namespace, linked to this one by a shaped veth pair or by the user-space TUN link (whose process
    it yields, so that a caller can cut the link with SIGUSR1)."""
    sh("ip", "netns", "add", NAMESPACE)
    carrier_process: subprocess.Popen[str] | None = None
    inside = ("ip", "netns", "exec", NAMESPACE)
    try:
        sh(*inside, "ip", "link", "set", "lo", "up")  # the worker's own RPC server is on its loopback
        if carrier == TUN:
            carrier_process = _tun_link(link)
        else:
            _veth(link)
        yield carrier_process
    finally:
        if carrier_process is not None:
            carrier_process.terminate()
            carrier_process.wait(timeout=15)
        sh("ip", "link", "del", MAIN_END, check=False)
        sh("ip", "netns", "del", NAMESPACE, check=False)


def _tun_link(link: Link) -> subprocess.Popen[str]:
    command = [sys.executable, str(ROOT / "bench" / "tun_link.py"), "--namespace", NAMESPACE]
    command += ["--here", MAIN_END, "--there", WORKER_END, "--here-ip", MAIN_IP, "--there-ip", WORKER_IP]
    command += ["--delay-ms", str(link.delay_ms or 0.0), "--loss", str(link.loss)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        process.kill()
        raise RuntimeError("the user-space link did not start (run as root, with /dev/net/tun)")
    return process


def _veth(link: Link) -> None:
    inside = ("ip", "netns", "exec", NAMESPACE)
    sh("ip", "link", "add", MAIN_END, "type", "veth", "peer", "name", WORKER_END)
    sh("ip", "link", "set", WORKER_END, "netns", NAMESPACE)
    sh("ip", "addr", "add", f"{MAIN_IP}/24", "dev", MAIN_END)
    sh("ip", "link", "set", MAIN_END, "up")
    sh(*inside, "ip", "addr", "add", f"{WORKER_IP}/24", "dev", WORKER_END)
    sh(*inside, "ip", "link", "set", WORKER_END, "up")
    for prefix, device in (((), MAIN_END), (inside, WORKER_END)):  # both directions
        if link.needs_netem:
            shape = ["netem", "delay", f"{(link.delay_ms or 0.0) / 2}ms"]
            shape += ["loss", f"{link.loss * 100}%"] if link.loss else []
            shape += ["rate", link.rate] if link.rate else []
            sh(*prefix, "tc", "qdisc", "add", "dev", device, "root", *shape)
        elif link.rate:
            tbf = ["tbf", "rate", link.rate, "burst", link.burst, "latency", "100ms"]
            sh(*prefix, "tc", "qdisc", "add", "dev", device, "root", *tbf)


@contextlib.contextmanager
def worker(home: Path, threads: int) -> Iterator[str]:
    """A `hearth worker` inside the namespace; yields its pairing code."""
    process = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            NAMESPACE,
            sys.executable,
            "-m",
            "app",
            "worker",
            "--host",
            WORKER_IP,
            "--port",
            str(PORT),
            "--threads",
            str(threads),
        ],
        env={**os.environ, "HEARTH_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("pairing code: "):
                yield line.removeprefix("pairing code: ").strip()
                break
        else:
            raise RuntimeError("the worker ended before printing its pairing code")
    finally:
        process.terminate()
        process.wait(timeout=15)


def decode_rates(settings: object, rounds: int, max_tokens: int) -> tuple[list[float], str]:
    """Decode tokens/s of one user's greedy answer over ``rounds``, and the answer's text."""
    from app.bench.pipeline import SPLIT, _hearth_round
    from app.services.container import build_services
    from backends.base import GenerationParams

    services = build_services(settings)  # type: ignore[arg-type]
    try:
        list(services.control.start())
        warm = GenerationParams(temperature=0.0, max_new_tokens=8, repeat_penalty=1.0)
        _hearth_round(SPLIT, services.runtime, 1, warm, ())
        params = GenerationParams(temperature=0.0, max_new_tokens=max_tokens, repeat_penalty=1.0)
        rates = []
        for _ in range(rounds):
            answer = _hearth_round(SPLIT, services.runtime, 1, params, ()).answers[0]
            rates.append(1.0 / answer.between_tokens_s if answer.between_tokens_s else 0.0)
        return rates, greedy_text(services.runtime, params)
    finally:
        services.close()


def greedy_text(runtime: object, params: object) -> str:
    from app.bench.chat import QUESTIONS, SYSTEM
    from backends.base import CancelToken, ChatMessage, TextDelta

    messages = [ChatMessage("system", SYSTEM), ChatMessage("user", QUESTIONS[0])]
    with runtime.lease() as engine:  # type: ignore[attr-defined]
        events = engine.stream_chat(messages, params, CancelToken())
        return "".join(e.text for e in events if isinstance(e, TextDelta))


def cut_mid_answer(settings: object, carrier: subprocess.Popen[str]) -> Cut:
    """Cuts the link (every packet dropped) after the answer's tenth piece; times the answer's end and asks again."""
    from app.services.container import build_services
    from backends.base import GenerationParams, TextDelta
    from models.shared.errors import EngineStopped

    result = Cut(TUN)
    services = build_services(settings)  # type: ignore[arg-type]
    try:
        list(services.control.start())
        pieces, cut_at = 0, 0.0
        story = GenerationParams(temperature=0.7, max_new_tokens=400, seed=3)
        try:
            for event in services.chat.send(
                None, "Write a long story about the sea.", TurnSettings(story, "You tell stories.")
            ):
                pieces += isinstance(event, TextDelta)
                if pieces == 10 and not cut_at:
                    os.kill(carrier.pid, signal.SIGUSR1)
                    cut_at = time.monotonic()
            result.error = "the answer ended normally after the cut"
        except EngineStopped as stopped:
            result.ended_after_s = time.monotonic() - cut_at
            result.message = stopped.message
        deadline = time.monotonic() + 180
        while services.runtime.status.state != "ready" and time.monotonic() < deadline:
            time.sleep(0.2)
        choice = services.runtime.choice
        result.next_plan_workers = list(choice.prefs.workers) if choice is not None else []
        result.next_answer = greedy_text(services.runtime, GenerationParams(0.0, 12, repeat_penalty=1.0))
    except Exception as exc:  # reported in the table, not raised: the other rows stand
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        services.close()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2, help="the worker's threads, and this machine's alone")
    parser.add_argument("--model", type=Path, help="GGUF file (default: the embedded model)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("This bench makes a network namespace and shapes links: run it as root (sudo).", file=sys.stderr)
        return 2

    from app.services.workers import WorkerBook
    from app.settings import load_settings
    from backends.workers.cost import LinkFacts, network_ms_per_token, output_here
    from models.gguf import read_model_info

    no_netem = netem_available()
    links = [(link, TUN if link.needs_netem and no_netem else VETH) for link in LINKS]
    if no_netem:
        links.insert(next(i for i, (_, c) in enumerate(links) if c == TUN), (TUN_BASE, TUN))
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="hearth-lan-") as scratch:
        home, worker_home = Path(scratch) / "main", Path(scratch) / "worker"
        common: dict[str, object] = {"home": str(home), "model": {"context_length": 1024}}
        if args.model:
            common["model"] = {"context_length": 1024, "path": str(args.model)}
        alone = load_settings(**common, backend={"name": "llamacpp", "threads": args.threads})
        split = load_settings(**common, backend={"name": "pipeline", "threads": args.threads})
        print("one process on this machine…", flush=True)
        local_before, alone_text = decode_rates(alone, args.rounds, args.max_tokens)
        model_path = args.model
        if model_path is None:
            from models.embedded import embedded_chat_model

            model_path = embedded_chat_model()
        info = read_model_info(model_path)
        for link, carrier in links:
            print(f"{link.name} ({carrier})…", flush=True)
            with namespace(link, carrier), worker(worker_home, args.threads) as code:
                book = WorkerBook(home / "workers.json")
                home.mkdir(parents=True, exist_ok=True)
                paired = book.add(f"{WORKER_IP}:{PORT}", code)
                rates, text = decode_rates(split, args.rounds, args.max_tokens)
                book.remove(paired.address)
            facts = LinkFacts(paired.round_trip_ms, paired.bandwidth_bytes_per_s)
            # as the planner counts it: a CPU worker's logits do not come back (the output projection runs here)
            logits_back = not output_here([paired.facts.device])
            predicted = network_ms_per_token((facts,), info.vocab_size or 0, info.embedding_length or 0, logits_back)
            results.append(
                Result(
                    link.name,
                    carrier=carrier,
                    round_trip_ms=paired.round_trip_ms,
                    bits_per_s=paired.bandwidth_bytes_per_s * 8,
                    tokens_per_s=rates,
                    ms_per_token=1000 / statistics.median(rates),
                    predicted_network_ms=predicted,
                    same_text=text == alone_text,
                )
            )
        print("the link cut mid-answer…", flush=True)
        with namespace(TUN_BASE, TUN) as carrier_process, worker(worker_home, args.threads) as code:
            assert carrier_process is not None
            book = WorkerBook(home / "workers.json")
            paired = book.add(f"{WORKER_IP}:{PORT}", code)
            cut = cut_mid_answer(split, carrier_process)
            book.remove(paired.address)
        local_after, _ = decode_rates(alone, args.rounds, args.max_tokens)
    for carrier in (VETH, TUN):
        base = next((r for r in results if r.carrier == carrier), None)
        for result in results:
            if base is not None and result.carrier == carrier:
                # what this link costs per token beyond the unshaped one, next to what the planner predicts beyond it
                result.measured_network_ms = result.ms_per_token - base.ms_per_token + base.predicted_network_ms
    local = local_before + local_after
    print(
        f"\nmodel {model_path.name}; this machine alone: "
        f"{statistics.median(local):.1f} tok/s (min {min(local):.1f}, max {max(local):.1f}, {len(local)} rounds)"
    )
    if no_netem:
        print(f"{no_netem}: delays and losses went through the user-space TUN link (bench/tun_link.py)")
    header = f"{'link':<16}{'carrier':<9}{'RTT ms':>8}{'Mbit/s':>9}{'tok/s':>8}{'ms/tok':>8}"
    print(header + f"{'net ms pred':>13}{'net ms seen':>13}  same text")
    for result in results:
        seen = f"{result.measured_network_ms:.1f}" if result.measured_network_ms is not None else "-"
        print(
            f"{result.link:<16}{'TUN' if result.carrier == TUN else 'veth':<9}{result.round_trip_ms:>8.2f}"
            f"{result.bits_per_s / 1e6:>9.0f}{statistics.median(result.tokens_per_s):>8.1f}{result.ms_per_token:>8.1f}"
            f"{result.predicted_network_ms:>13.1f}{seen:>13}  {'yes' if result.same_text else 'no'}"
        )
    if cut.error:
        print(f"\nlink cut mid-answer: {cut.error}")
    else:
        print(
            f"\nlink cut mid-answer: the answer ended {cut.ended_after_s:.1f} s after the cut with "
            f'"{cut.message}"; the next question was answered with the plan\'s workers '
            f"{cut.next_plan_workers or 'none'}: {cut.next_answer!r}"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "model": str(model_path.name),
                    "alone_tokens_per_s": local,
                    "netem": no_netem or "available",
                    "links": [asdict(r) for r in results],
                    "cut_mid_answer": asdict(cut),
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
