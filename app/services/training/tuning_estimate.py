"""The time a tuning run will take, for the page's check: at the pace an earlier run of the same model kept on
this computer when there is one, else from this CPU's measured speed at matrix products (measured once, in a
process of its own so the page never imports torch, and kept in the data folder)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from app.paths import DataPaths, write_private_text
from backends.child_env import child_environment
from models.tuning.estimate import TimeEstimate, from_arithmetic, from_pace, tokens_per_step
from models.tuning.options import TuneOptions
from models.tuning.runs import RunFolder, RunStats

SPEED_FILE = "cpu-speed.json"
MEASURE_TIMEOUT_S = 60.0


def estimate_run(
    paths: DataPaths, base_sha256: str, parameters: int, stats: RunStats, options: TuneOptions, threads: int
) -> TimeEstimate | None:
    """The run's time on the CPU; None when this CPU's speed could not be measured (the check says nothing of
    time then, rather than guess)."""
    steps = stats.total_steps
    step_tokens = tokens_per_step(stats.tokens, stats.train, options.batch_size)
    pace = earlier_pace(paths, base_sha256, threads)
    if pace is not None:
        return from_pace(parameters, step_tokens, steps, pace)
    speed = cpu_speed(paths, threads)
    return None if speed is None else from_arithmetic(parameters, step_tokens, steps, speed)


def earlier_pace(paths: DataPaths, base_sha256: str, threads: int) -> float | None:
    """The median tokens/s of the newest run that trained this model on this computer's CPU with as many
    threads and took at least two steps (its first steps warm up, the median looks past them)."""
    if not paths.tuning_dir.is_dir():
        return None
    folders = sorted((p for p in paths.tuning_dir.iterdir() if (p / "job.json").is_file()), reverse=True)
    for folder in folders:
        run = RunFolder(folder)
        try:
            job = run.job()
            events = list(run.events())
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a damaged run says nothing about the pace
        if job.base_sha256 != base_sha256 or job.threads != threads or job.probe_steps:
            continue
        on_cpu = any(e.get("kind") == "phase" and "on the CPU" in str(e.get("message", "")) for e in events)
        paces = [float(e["tokens_per_s"]) for e in events if e.get("kind") == "step" and e.get("tokens_per_s")]
        if on_cpu and len(paces) >= 2:
            return statistics.median(paces)
    return None


def cpu_speed(paths: DataPaths, threads: int) -> float | None:
    """Matrix-product operations per second on ``threads`` threads: measured once (about 3 s, most of it
    starting torch), then read from the data folder."""
    file = paths.tuning_dir / SPEED_FILE
    key = f"{threads} of {os.cpu_count()}"
    try:
        known = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    if isinstance(known.get(key), int | float) and known[key] > 0:
        return float(known[key])
    env = child_environment()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "models.tuning.speed", str(threads)],
            capture_output=True,
            text=True,
            timeout=MEASURE_TIMEOUT_S,
            env=env,
            check=True,
        )
        speed = float(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    known[key] = speed
    try:
        paths.tuning_dir.mkdir(parents=True, exist_ok=True)
        write_private_text(file, json.dumps(known))
    except OSError:
        pass  # measured again next time
    return speed
