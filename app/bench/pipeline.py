"""``hearth bench pipeline``: one process against the model split across `hearth worker`s, and Hearth's split against
llama.cpp's own RPC client driven directly with the same split, in the same run.

For each plan and each number of users at once (1, 2, 4, 8 by default): aggregate tokens/s, latency per token per
user (p50/p95 of each answer's time between tokens), time to the first token, and the bytes that crossed the
workers' ports per generated token (the kernel's TCP counters; the direct client reaches the workers' private Unix
sockets, which keep no such counters, so its bytes are not measured). Load time once per plan. Energy per token
where the machine exposes it (``app/bench/meters.py``: Intel RAPL, NVIDIA's NVML); otherwise the report says it cannot
measure energy here.

Rounds interleave the plans so drift on a shared machine hits them alike; the workers are started here on loopback
(1 thread each) and paired with the benchmark's own data folder. A ggml RPC server serves one client at a time, so
the direct llama.cpp client gets workers of its own. Progress goes to stderr; the table to stdout; --json and
--chart too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.bench.chat import QUESTIONS, SYSTEM, progress
from app.bench.meters import Stage, cpu_seconds, energy_j, energy_source, worker_io
from app.bench.stats import paired_ratios, spread
from backends.base import CancelToken, ChatMessage, GenerationParams, TextDelta

SINGLE, SPLIT, RAW = "one process", "split (Hearth)", "split (llama.cpp RPC, direct)"


@dataclass(frozen=True)
class Answer:
    first_token_s: float  # from the request
    tokens: int
    between_tokens_s: float  # mean time between tokens after the first


@dataclass(frozen=True)
class Round:
    plan: str
    users: int
    tokens: int
    wall_s: float
    answers: tuple[Answer, ...]
    worker_bytes: int = 0
    energy_j: float | None = None
    stage_busy_s: tuple[float, ...] = ()  # per stage of the plan (see Stage): CPU seconds over its threads

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s > 0 else 0.0


@dataclass
class Report:
    model: str
    workers: list[str]
    threads: int
    max_tokens: int
    load_s: dict[str, float] = field(default_factory=dict)
    rounds: list[Round] = field(default_factory=list)
    energy: str = ""
    stages: dict[str, list[str]] = field(default_factory=dict)  # each plan's stage names, in the order of the chain


def run_pipeline_bench(args: argparse.Namespace) -> int:
    from app.services.container import build_services, measuring
    from app.settings import load_settings

    users = sorted({int(c) for c in args.users.split(",")})
    worker_pids: dict[str, int] = {}
    with (
        tempfile.TemporaryDirectory(prefix="hearth-bench-") as home,
        _workers(args.workers, home, Path(home) / "workers.json", worker_pids) as paired,
        _workers(args.workers, home, Path(home) / "raw-workers.json") as raw_paired,
    ):
        endpoints = [address for address, _ in paired]  # their control ports: what crosses the network
        raw_endpoints = [rpc for _, rpc in raw_paired]  # their llama.cpp servers' sockets, reached directly
        common: dict[str, Any] = {"home": home, "model": {"context_length": 1024}}
        if args.model:
            common["model"]["path"] = str(args.model)
        threads = args.threads
        plans = {
            SINGLE: load_settings(**common, backend={"name": "llamacpp", "slots": max(users), "threads": threads}),
            SPLIT: load_settings(
                **common,
                backend={"name": "pipeline", "slots": max(users), "threads": threads},  # every paired worker
            ),
        }
        report = Report("", endpoints, threads, args.max_tokens, energy=energy_source())
        services = {}
        try:
            for name, settings in plans.items():
                progress(f"loading: {name}")
                started = time.perf_counter()
                services[name] = build_services(measuring(settings))
                list(services[name].control.start())
                report.load_s[name] = time.perf_counter() - started
            model = services[SINGLE].runtime.model
            split_plan = services[SPLIT].runtime.status.plan
            assert model is not None and split_plan is not None
            report.model = model.display_name
            raw = None
            if raw_endpoints:
                progress("loading: llama.cpp's own RPC client with the same split, on workers of its own")
                started = time.perf_counter()
                raw = _raw_split(model.path, raw_endpoints, split_plan, threads)
                report.load_s[RAW] = time.perf_counter() - started
            params = GenerationParams(temperature=0.0, max_new_tokens=args.max_tokens, repeat_penalty=1.0)
            stages = {name: _stages(services[name].runtime, threads, worker_pids) for name in plans}
            report.stages = {name: [stage.name for stage in chain] for name, chain in stages.items()}
            for name in plans:  # warm-up, not counted
                _hearth_round(name, services[name].runtime, 1, GenerationParams(0.0, 8), endpoints)
            for index in range(args.runs):
                for count in users:
                    for name in plans:
                        progress(f"round {index + 1} of {args.runs}: {name}, {count} at once")
                        runtime = services[name].runtime
                        report.rounds.append(_hearth_round(name, runtime, count, params, endpoints, stages[name]))
                if raw is not None:
                    progress(f"round {index + 1} of {args.runs}: {RAW}, 1 at a time")
                    report.rounds.append(_raw_round(raw, args.max_tokens))
            if raw is not None:
                raw.close()
        finally:
            for service in services.values():
                service.close()
    summary = summarise(report, users)
    print_summary(summary)
    if args.json:
        args.json.write_text(json.dumps(summary | {"rounds": [asdict(r) for r in report.rounds]}, indent=2))
    if args.chart:
        write_chart(summary, args.chart)
    return 0


def _stages(runtime: Any, threads: int, worker_pids: dict[str, int]) -> list[Stage]:
    """The processes computing a plan's tokens: the engine, then the workers its plan puts layers on."""
    status = runtime.status
    chain = [Stage("this machine", status.engine_pid, threads)] if status.engine_pid else []
    plan = status.plan
    for worker in plan.workers if plan is not None else ():
        if worker in worker_pids:
            chain.append(Stage(worker, worker_pids[worker], 1))
    return chain


@contextmanager
def _workers(count: int, home: str, book: Path, pids: dict[str, int] | None = None) -> Iterator[list[tuple[str, str]]]:
    """``count`` workers started here on loopback (1 thread each, their caches in ``home``), paired into ``book``;
    yields each one's control address and its llama.cpp server's socket (``unix:PATH``, this account's alone).
    ``pids``, when given, receives each worker's process id by the address mains pair with."""
    from app.cli.worker import free_port
    from app.services.workers import WorkerBook

    started: list[subprocess.Popen[str]] = []
    try:
        for _ in range(count):
            started.append(
                subprocess.Popen(
                    [sys.executable, "-m", "app", "worker", "--port", str(free_port()), "--threads", "1"],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,  # the servers' per-tensor log lines
                    env={**os.environ, "HEARTH_HOME": home},
                    text=True,
                )
            )
        paired = WorkerBook(book)
        for process in started:
            serving = process.stdout.readline() if process.stdout else ""
            code_line = process.stdout.readline() if process.stdout else ""
            if "serving" not in serving or not code_line.startswith("pairing code: "):
                raise RuntimeError(f"a worker did not start: {serving!r} {code_line!r}")
            address = serving.split(" on ", 1)[1].split(" ", 1)[0]
            paired.add(address, code_line.removeprefix("pairing code: ").strip())
            if pids is not None:
                pids[address] = process.pid
        yield [(worker.address, worker.facts.rpc) for worker in paired.paired()]
    finally:
        for process in started:
            process.terminate()
            process.wait(timeout=15)


def _measured(
    plan: str, users: int, workers: Sequence[str], work: Callable[[], list[Answer]], stages: Sequence[Stage] = ()
) -> Round:
    io_before, energy_before, cpu_before = worker_io(workers), energy_j(), cpu_seconds(stages)
    started = time.perf_counter()
    answers = work()
    wall = time.perf_counter() - started
    cpu_after = cpu_seconds(stages)
    energy_after = energy_j()
    energy = energy_after - energy_before if energy_after is not None and energy_before is not None else None
    bytes_moved = worker_io(workers) - io_before if plan != SINGLE else 0
    busy = tuple(
        (after - before) / max(stage.threads, 1)
        for stage, before, after in zip(stages, cpu_before, cpu_after, strict=True)
    )
    return Round(plan, users, sum(a.tokens for a in answers), wall, tuple(answers), bytes_moved, energy, busy)


def _timed(pieces: Iterator[str], requested: float) -> Answer:
    stamps = [time.perf_counter() for piece in pieces if piece]
    if not stamps:
        return Answer(0.0, 0, 0.0)
    between = (stamps[-1] - stamps[0]) / (len(stamps) - 1) if len(stamps) > 1 else 0.0
    return Answer(stamps[0] - requested, len(stamps), between)


def _hearth_round(
    plan: str,
    runtime: Any,
    users: int,
    params: GenerationParams,
    workers: Sequence[str],
    stages: Sequence[Stage] = (),
) -> Round:
    answers: list[Answer | None] = [None] * users
    errors: list[BaseException] = []
    go = threading.Barrier(users + 1)  # every user holds the model before any asks

    def answer(index: int) -> None:
        messages = [ChatMessage("system", SYSTEM), ChatMessage("user", QUESTIONS[index % len(QUESTIONS)])]
        try:
            with runtime.lease() as engine:
                go.wait()
                requested = time.perf_counter()
                events = engine.stream_chat(messages, params, CancelToken())
                pieces = (e.text for e in events if isinstance(e, TextDelta))
                answers[index] = _timed(pieces, requested)
        except threading.BrokenBarrierError:
            pass  # another user could not start: its error is the round's
        except BaseException as exc:  # reported after the round
            errors.append(exc)
            go.abort()  # a user who never reaches the barrier would leave the others waiting at it for ever

    def work() -> list[Answer]:
        threads = [threading.Thread(target=answer, args=(i,)) for i in range(users)]
        for thread in threads:
            thread.start()
        with suppress(threading.BrokenBarrierError):  # a user failed before the start: its error is raised below
            go.wait()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        return [a for a in answers if a is not None]

    return _measured(plan, users, workers if plan != SINGLE else (), work, stages)


def _raw_split(path: Path, endpoints: Sequence[str], plan: Any, threads: int) -> Any:
    """llama-cpp-python's own ``Llama`` on llama.cpp's RPC client, placing the weights as ``plan`` does: the same
    layer split and offload count, and the output projection on this CPU when the plan keeps it here."""
    from app.bench.chat import open_raw_llama
    from backends.local_socket import parse_local
    from backends.workers.rpc import attach_workers, output_on_cpu_overrides

    attach_workers(tuple(where for e in endpoints if (where := parse_local(e)) is not None))
    overrides = output_on_cpu_overrides() if plan.output_on_cpu else None
    return open_raw_llama(
        path, 1024, threads, overrides, n_gpu_layers=plan.gpu_layers, tensor_split=list(plan.tensor_split)
    )


def _raw_round(raw: Any, max_tokens: int) -> Round:
    def work() -> list[Answer]:
        requested = time.perf_counter()
        stream = raw.create_chat_completion(
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTIONS[0]}],
            max_tokens=max_tokens,
            temperature=0.0,
            repeat_penalty=1.0,
            stream=True,
        )
        return [_timed((c["choices"][0]["delta"].get("content") or "" for c in stream), requested)]

    return _measured(RAW, 1, (), work)  # its sockets keep no byte counters


def _percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def summarise(report: Report, users: Sequence[int]) -> dict[str, Any]:
    def rounds(plan: str, count: int) -> list[Round]:
        return [r for r in report.rounds if r.plan == plan and r.users == count]

    rows = []
    for plan in (SINGLE, SPLIT, RAW):
        for count in users if plan != RAW else [1]:
            these = rounds(plan, count)
            if not these:
                continue
            answers = [a for r in these for a in r.answers]
            tokens = sum(r.tokens for r in these)
            energies = [r.energy_j for r in these]
            rows.append(
                {
                    "plan": plan,
                    "users": count,
                    "aggregate_tokens_per_s": statistics.median(r.tokens_per_s for r in these),
                    "ms_per_token_p50": 1000 * _percentile([a.between_tokens_s for a in answers], 0.5),
                    "ms_per_token_p95": 1000 * _percentile([a.between_tokens_s for a in answers], 0.95),
                    "first_token_ms_p50": 1000 * _percentile([a.first_token_s for a in answers], 0.5),
                    "bytes_per_token": sum(r.worker_bytes for r in these) / tokens if tokens and plan != SINGLE else 0,
                    "joules_per_token": sum(e for e in energies if e is not None) / tokens
                    if tokens and all(e is not None for e in energies)
                    else None,
                    **_stage_shares(these, report.stages.get(plan, [])),
                }
            )
    single_one = [r.tokens_per_s for r in rounds(SINGLE, 1)]
    split_one = [r.tokens_per_s for r in rounds(SPLIT, 1)]
    raw_one = [r.tokens_per_s for r in rounds(RAW, 1)]
    return {
        "model": report.model,
        "workers": report.workers,
        "threads": report.threads,
        "max_tokens": report.max_tokens,
        "load_s": report.load_s,
        "energy": report.energy,
        "rows": rows,
        "split_vs_one_process": spread(paired_ratios(split_one, single_one)).as_dict() if single_one else None,
        "split_vs_llama_cpp_rpc": spread(paired_ratios(split_one, raw_one)).as_dict() if raw_one else None,
    }


def _stage_shares(rounds: Sequence[Round], names: Sequence[str]) -> dict[str, Any]:
    """Each stage's busy time as a share of the round (median over rounds), and their sum: how much the stages
    computed at the same time (1.0: one after another)."""
    measured = [r for r in rounds if len(r.stage_busy_s) == len(names) and names and r.wall_s > 0]
    if not measured:
        return {}
    shares = {
        name: statistics.median(r.stage_busy_s[index] / r.wall_s for r in measured) for index, name in enumerate(names)
    }
    return {"stage_busy": shares, "stages_at_once": statistics.median(sum(r.stage_busy_s) / r.wall_s for r in measured)}


def print_summary(summary: dict[str, Any]) -> None:
    out = sys.stdout
    out.write(
        f"model {summary['model']}, workers {', '.join(summary['workers'])}, {summary['threads']} threads in the "
        f"engine, {summary['max_tokens']} tokens per answer; medians over rounds\n"
    )
    out.write("load: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in summary["load_s"].items()) + "\n")
    head = f"{'plan':<32}{'users':>6}{'tok/s':>9}{'ms/tok p50':>12}{'p95':>8}{'TTFT ms':>9}{'B/tok':>10}{'J/tok':>8}"
    out.write(head + "\n")
    for row in summary["rows"]:
        joules = f"{row['joules_per_token']:.3f}" if row["joules_per_token"] is not None else "-"
        moved = f"{row['bytes_per_token']:.0f}" if row["plan"] != RAW else "-"  # its sockets keep no counters
        out.write(
            f"{row['plan']:<32}{row['users']:>6}{row['aggregate_tokens_per_s']:>9.1f}{row['ms_per_token_p50']:>12.1f}"
            f"{row['ms_per_token_p95']:>8.1f}{row['first_token_ms_p50']:>9.0f}{moved:>10}"
            f"{joules:>8}\n"
        )
    for key, words in (("split_vs_one_process", "split / one process"), ("split_vs_llama_cpp_rpc", "split / raw RPC")):
        value = summary[key]
        if value:
            out.write(
                f"{words}, 1 user, per round: median {value['median']:.2f} "
                f"(min {value['low']:.2f}, max {value['high']:.2f}, {value['runs']} rounds)\n"
            )
    busy = [row for row in summary["rows"] if row.get("stage_busy")]
    if busy:
        out.write("busy share of each round, by stage (CPU time over threads; their sum 1.0 = one at a time):\n")
        for row in busy:
            stages = ", ".join(f"{name} {share:.2f}" for name, share in row["stage_busy"].items())
            out.write(f"  {row['plan']}, {row['users']} at once: {stages}; together {row['stages_at_once']:.2f}\n")
    out.write(f"energy: {summary['energy']}\n")
    out.flush()


def write_chart(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    for plan in (SINGLE, SPLIT):
        rows = [r for r in summary["rows"] if r["plan"] == plan]
        axis.plot([r["users"] for r in rows], [r["aggregate_tokens_per_s"] for r in rows], marker="o", label=plan)
    axis.set_xlabel("users at once")
    axis.set_ylabel("aggregate tokens/s")
    axis.set_title(f"{summary['model']}: one process vs split across {len(summary['workers'])} workers")
    axis.legend()
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
