"""A model split onto a worker across a network, simulated on this machine: the worker runs in a network namespace of
its own behind a veth pair (its own network stack, reached at 10.77.0.2 through the TLS link, never loopback), and
the pair is shaped with `tc` (tbf for bandwidth; netem for delay, where the kernel has it). For each link: the round
trip and bandwidth Hearth measured through it, decode tokens/s for one user over several rounds, and the network
cost per token Hearth's planner predicts for that link, against the cost the rounds show (the split's time per token
minus the unshaped link's). One process on this machine is measured in the same run.

Needs root (ip netns, tc). Run alone on a quiet machine:

    sudo .venv/bin/python bench/lan_pipeline.py --json bench/data/pipeline-lan.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

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
    delay_ms: float | None = None


LINKS = (
    Link("veth, unshaped"),
    Link("1 Gbit/s", rate="1gbit", burst="128kb"),
    Link("100 Mbit/s", rate="100mbit"),
    Link("0.1 ms", delay_ms=0.1),
    Link("1 ms", delay_ms=1.0),
    Link("5 ms", delay_ms=5.0),
)


@dataclass
class Result:
    link: str
    skipped: str = ""
    round_trip_ms: float = 0.0
    bits_per_s: float = 0.0
    tokens_per_s: list[float] = field(default_factory=list)
    ms_per_token: float = 0.0
    predicted_network_ms: float = 0.0
    measured_network_ms: float | None = None


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
def namespace(link: Link) -> Iterator[None]:
    sh("ip", "netns", "add", NAMESPACE)
    try:
        sh("ip", "link", "add", MAIN_END, "type", "veth", "peer", "name", WORKER_END)
        sh("ip", "link", "set", WORKER_END, "netns", NAMESPACE)
        sh("ip", "addr", "add", f"{MAIN_IP}/24", "dev", MAIN_END)
        sh("ip", "link", "set", MAIN_END, "up")
        inside = ("ip", "netns", "exec", NAMESPACE)
        sh(*inside, "ip", "addr", "add", f"{WORKER_IP}/24", "dev", WORKER_END)
        sh(*inside, "ip", "link", "set", WORKER_END, "up")
        sh(*inside, "ip", "link", "set", "lo", "up")  # the worker's own RPC server is on its loopback
        for prefix, device in (((), MAIN_END), (inside, WORKER_END)):  # both directions
            if link.delay_ms is not None:
                shape = ["netem", "delay", f"{link.delay_ms / 2}ms"] + (["rate", link.rate] if link.rate else [])
                sh(*prefix, "tc", "qdisc", "add", "dev", device, "root", *shape)
            elif link.rate:
                sh(
                    *prefix,
                    "tc",
                    "qdisc",
                    "add",
                    "dev",
                    device,
                    "root",
                    "tbf",
                    "rate",
                    link.rate,
                    "burst",
                    link.burst,
                    "latency",
                    "100ms",
                )
        yield
    finally:
        sh("ip", "link", "del", MAIN_END, check=False)
        sh("ip", "netns", "del", NAMESPACE, check=False)


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


def decode_rates(settings: object, rounds: int, max_tokens: int) -> list[float]:
    from app.bench_pipeline import SPLIT, _hearth_round
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
        return rates
    finally:
        services.close()


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
    from backends.pipeline_cost import LinkFacts, network_ms_per_token
    from models.gguf import read_model_info

    no_netem = netem_available()
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="hearth-lan-") as scratch:
        home, worker_home = Path(scratch) / "main", Path(scratch) / "worker"
        common: dict[str, object] = {"home": str(home), "model": {"context_length": 1024}}
        if args.model:
            common["model"] = {"context_length": 1024, "path": str(args.model)}
        alone = load_settings(**common, backend={"name": "llamacpp", "threads": args.threads})
        split = load_settings(**common, backend={"name": "pipeline", "threads": args.threads})
        print("one process on this machine…", flush=True)
        local_before = decode_rates(alone, args.rounds, args.max_tokens)
        model_path = args.model
        if model_path is None:
            from models.embedded import embedded_chat_model

            model_path = embedded_chat_model()
        info = read_model_info(model_path)
        for link in LINKS:
            if link.delay_ms is not None and no_netem:
                results.append(Result(link.name, skipped=no_netem))
                print(f"{link.name}: skipped, {no_netem}", flush=True)
                continue
            print(f"{link.name}…", flush=True)
            with namespace(link), worker(worker_home, args.threads) as code:
                book = WorkerBook(home / "workers.json")
                home.mkdir(parents=True, exist_ok=True)
                paired = book.add(f"{WORKER_IP}:{PORT}", code)
                rates = decode_rates(split, args.rounds, args.max_tokens)
                book.remove(paired.address)
            facts = LinkFacts(paired.round_trip_ms, paired.bandwidth_bytes_per_s)
            predicted = network_ms_per_token((facts,), info.vocab_size or 0, info.embedding_length or 0)
            results.append(
                Result(
                    link.name,
                    round_trip_ms=paired.round_trip_ms,
                    bits_per_s=paired.bandwidth_bytes_per_s * 8,
                    tokens_per_s=rates,
                    ms_per_token=1000 / statistics.median(rates),
                    predicted_network_ms=predicted,
                )
            )
        local_after = decode_rates(alone, args.rounds, args.max_tokens)
    base = next((r for r in results if not r.skipped), None)
    for result in results:
        if base is not None and not result.skipped:
            # what this link costs per token beyond the unshaped one, next to what the planner predicts beyond it
            result.measured_network_ms = result.ms_per_token - base.ms_per_token + base.predicted_network_ms
    local = local_before + local_after
    print(
        f"\nmodel {info.display_name if hasattr(info, 'display_name') else model_path.name}; this machine alone: "
        f"{statistics.median(local):.1f} tok/s (min {min(local):.1f}, max {max(local):.1f}, {len(local)} rounds)"
    )
    print(f"{'link':<18}{'RTT ms':>8}{'Mbit/s':>9}{'tok/s':>8}{'ms/tok':>8}{'net ms pred':>13}{'net ms seen':>13}")
    for result in results:
        if result.skipped:
            print(f"{result.link:<18}skipped: {result.skipped}")
            continue
        seen = f"{result.measured_network_ms:.1f}" if result.measured_network_ms is not None else "-"
        print(
            f"{result.link:<18}{result.round_trip_ms:>8.2f}{result.bits_per_s / 1e6:>9.0f}"
            f"{statistics.median(result.tokens_per_s):>8.1f}{result.ms_per_token:>8.1f}"
            f"{result.predicted_network_ms:>13.1f}{seen:>13}"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "model": str(model_path.name),
                    "alone_tokens_per_s": local,
                    "netem": no_netem or "available",
                    "links": [asdict(r) for r in results],
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
