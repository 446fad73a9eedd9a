"""The record of one tuning run on disk, shared by the training process (which writes it) and the page and the
CLI (which read it): so a page reload, a restart of Hearth or a killed trainer loses nothing.

A run folder holds ``job.json`` (what to train: the base model, the settings, the adapter's name), a copy of the
training data (``data.jsonl``: the run trains on what was chosen when it started, whatever happens to the
original), ``events.jsonl`` (one JSON object per line, appended by the trainer: phases, data statistics, each
step's loss, held-out losses, the end), the trainer's checkpoints, ``trainer.pid`` while it lives, and
``cancel`` when someone asked it to stop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from models.tuning.options import TuneOptions

State = Literal["starting", "running", "finished", "failed", "cancelled", "interrupted"]


@dataclass(frozen=True)
class Job:
    adapter_name: str
    base_path: str  # the GGUF the adapter is for (the trainer dequantizes it; llama.cpp checks on it)
    base_sha256: str
    base_name: str
    data_label: str  # where the examples came from, in words ("facts.jsonl", "3 conversations")
    options: TuneOptions
    threads: int
    adapters_dir: str  # where the finished adapter is added
    probe_steps: int = 0  # when set, a probe: this many steps to time the run, no checkpoints, no adapter
    created_at: float = field(default_factory=time.time)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Job:
        raw = json.loads(text)
        options = raw.pop("options")
        options["targets"] = tuple(options["targets"])
        return cls(options=TuneOptions(**options), **raw)


@dataclass(frozen=True)
class StepPoint:
    step: int
    loss: float
    tokens_per_s: float
    elapsed_s: float


@dataclass(frozen=True)
class RunView:
    """Everything the page and the CLI show about a run, folded from its events."""

    state: State
    phase: str = ""
    total_steps: int = 0
    steps: tuple[StepPoint, ...] = ()
    held_out: tuple[tuple[int, float], ...] = ()  # (step, held-out loss), step 0 is before training
    stats: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    error: dict[str, str] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)  # the memory estimate: total_bytes, available_bytes, text
    checkpoint_step: int = 0  # the last step a checkpoint was saved at
    sitting_from: int = 0  # index in ``steps`` of the first step since the trainer last (re)started
    probe: dict[str, Any] = field(default_factory=dict)  # a probe's pace: load_s, step_s, tokens_per_s, total_steps

    @property
    def step(self) -> int:
        return self.steps[-1].step if self.steps else 0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the pace of the steps taken in this sitting (a resumed run restarts the clock)."""
        sitting = self.steps[self.sitting_from :]
        if len(sitting) < 2 or not self.total_steps:
            return None
        first, last = sitting[0], sitting[-1]
        taken = last.step - first.step
        if taken <= 0 or last.elapsed_s <= first.elapsed_s:
            return None
        return (self.total_steps - last.step) * (last.elapsed_s - first.elapsed_s) / taken

    @property
    def resumable(self) -> bool:
        return self.state in ("interrupted", "cancelled", "failed") and self.checkpoint_step > 0


class RunFolder:
    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def id(self) -> str:
        return self.path.name

    job_file = property(lambda self: self.path / "job.json")
    data_file = property(lambda self: self.path / "data.jsonl")
    events_file = property(lambda self: self.path / "events.jsonl")
    checkpoints = property(lambda self: self.path / "checkpoints")
    pid_file = property(lambda self: self.path / "trainer.pid")
    cancel_file = property(lambda self: self.path / "cancel")
    adapter_file = property(lambda self: self.path / "adapter.gguf")
    log_file = property(lambda self: self.path / "trainer.log")

    def job(self) -> Job:
        return Job.from_json(self.job_file.read_text(encoding="utf-8"))

    def append(self, kind: str, **fields: Any) -> None:
        """Add one event (the trainer's side). One short line per write, so a reader never sees half of one
        unless the trainer dies mid-write, and that line is skipped."""
        line = json.dumps({"kind": kind, "at": time.time(), **fields}) + "\n"
        with self.events_file.open("a", encoding="utf-8") as handle:
            handle.write(line)

    def events(self) -> Iterator[dict[str, Any]]:
        try:
            text = self.events_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        for line in text.splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line of a trainer killed while writing it
            if isinstance(event, dict):
                yield event

    def mark_trainer(self, pid: int) -> None:
        """Record the trainer's pid with its start time, which tells it apart from a later process given the same
        pid."""
        import psutil

        try:
            started = psutil.Process(pid).create_time()
        except psutil.Error:
            started = 0.0
        self.pid_file.write_text(f"{pid} {started!r}")

    def trainer_pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def trainer_alive(self) -> bool:
        import psutil

        try:
            pid_text, started_text = self.pid_file.read_text().split()
            process = psutil.Process(int(pid_text))
            return bool(process.create_time() == float(started_text) and process.status() != psutil.STATUS_ZOMBIE)
        except (OSError, ValueError, psutil.Error):
            return False

    def view(self) -> RunView:
        # Whether the trainer lives first, then its events: a trainer writes its last event before it ends, so events
        # read after it was seen ended hold that event. Read the other way round, a run that finished between the two
        # reads looked interrupted (seen once in the suite).
        alive = self.trainer_alive()
        return fold_events(list(self.events()), alive)


def fold_events(events: list[dict[str, Any]], alive: bool) -> RunView:
    """A run's state from its events and whether its trainer still lives (pure)."""
    phase = ""
    total = 0
    steps: list[StepPoint] = []
    held: list[tuple[int, float]] = []
    stats: dict[str, Any] = {}
    plan: dict[str, Any] = {}
    result: dict[str, Any] = {}
    probe: dict[str, Any] = {}
    error: dict[str, str] = {}
    checkpoint = 0
    sitting_from = 0
    end: State | None = None
    for event in events:
        kind = event.get("kind")
        if kind == "started":
            end, error = None, {}
            sitting_from = len(steps)  # a resumed sitting: the clock for the ETA starts again
        elif kind == "phase":
            phase = str(event.get("message", ""))
        elif kind == "stats":
            stats = {k: v for k, v in event.items() if k not in ("kind", "at")}
            total = int(event.get("total_steps", total))
        elif kind == "plan":
            plan = {k: v for k, v in event.items() if k not in ("kind", "at")}
        elif kind == "step":
            point = StepPoint(
                int(event["step"]), float(event["loss"]), float(event["tokens_per_s"]), float(event["at"])
            )
            # Steps after the checkpoint a run resumed from are taken again; the newer ones replace them.
            while steps and steps[-1].step >= point.step:
                steps.pop()
                sitting_from = min(sitting_from, len(steps))
            steps.append(point)
        elif kind == "held_out":
            measured = (int(event["step"]), float(event["loss"]))
            held = [p for p in held if p[0] != measured[0]] + [measured]
        elif kind == "probe":
            probe = {k: v for k, v in event.items() if k not in ("kind", "at")}
        elif kind == "checkpoint":
            checkpoint = int(event["step"])
        elif kind == "finished":
            end, result = "finished", {k: v for k, v in event.items() if k not in ("kind", "at")}
        elif kind == "failed":
            end, error = "failed", {k: str(event.get(k, "")) for k in ("message", "remedy")}
        elif kind == "cancelled":
            end = "cancelled"
    if end is not None:
        state: State = end
    elif alive:
        state = "running" if steps or phase else "starting"
    else:
        state = "interrupted"
    return RunView(
        state,
        phase,
        total,
        tuple(steps),
        tuple(sorted(held)),
        stats,
        result,
        error,
        plan,
        checkpoint,
        sitting_from,
        probe,
    )
