"""The record of one tuning run on disk, shared by the training process (which writes it) and the page and the
CLI (which read it): so a page reload, a restart of Hearth or a killed trainer loses nothing.

A run folder holds ``job.json`` (what to train: the base model, the settings, the adapter's name), a copy of the
training data (``data.jsonl``: the run trains on what was chosen when it started, whatever happens to the
original), ``events.jsonl`` (one JSON object per line, appended by the trainer: phases, data statistics, each
step's loss, held-out losses, the end), the trainer's checkpoints, ``trainer.pid`` while it lives, and
``cancel`` when someone asked it to stop.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

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
    estimated_s: float | None = None  # the whole run's time as the check estimated it, when one was shown first
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
class RunStats:
    """The data as the run read it, before it trains (its "stats" event)."""

    examples: int = 0
    train: int = 0
    held_out: int = 0
    tokens: int = 0
    trained_tokens: int = 0  # the tokens of the answers it learns to write
    longest: int = 0
    cut: int = 0  # examples cut to the max length
    dropped: int = 0  # examples whose prompt alone fills the max length
    total_steps: int = 0
    checked_on_training_data: bool = False  # too few examples to hold some out: measured on those it trains on


@dataclass(frozen=True)
class RunPlan:
    """Where the run trains and the memory it needs there, before the model loads (its "plan" event)."""

    total_bytes: int = 0
    available_bytes: int = 0
    text: str = ""  # the estimate in words
    where: str = "cpu"  # cpu or gpu
    placement: str = ""  # where, in words
    window: int = 0  # layers on the GPU at once when they are streamed


@dataclass(frozen=True)
class RunResult:
    """What a finished run made (its "finished" event); a probe's finish only says it was one."""

    adapter: str = ""
    steps: int = 0
    perplexity_before: float | None = None
    perplexity_after: float | None = None
    held_out_before: float | None = None
    held_out_after: float | None = None
    probe: bool = False


@dataclass(frozen=True)
class RunProbe:
    """A probe's pace: a few real steps timed (its "probe" event)."""

    load_s: float = 0.0
    step_s: float = 0.0
    tokens_per_s: float = 0.0
    total_steps: int = 0


@dataclass(frozen=True)
class RunError:
    """Why a run failed, and what to do (its "failed" event)."""

    message: str = ""
    remedy: str = ""


R = TypeVar("R", RunStats, RunPlan, RunResult, RunProbe, RunError)


def record_of(kind: type[R], event: dict[str, Any]) -> R:
    """One of the records above from an event's fields: the fields it names, each as its declared type; a field
    it lacks keeps its default (events written by an older Hearth), one it does not know is left out."""
    known = {f.name: f for f in dataclasses.fields(kind)}
    values: dict[str, Any] = {}
    for name, value in event.items():
        if name not in known or value is None:
            continue
        default = known[name].default
        if isinstance(default, bool):
            values[name] = bool(value)
        elif isinstance(default, int):
            values[name] = int(value)
        elif isinstance(default, str):
            values[name] = str(value)
        else:  # float | None
            values[name] = float(value)
    return kind(**values)


@dataclass(frozen=True)
class RunView:
    """Everything the page and the CLI show about a run, folded from its events."""

    state: State
    phase: str = ""
    total_steps: int = 0
    steps: tuple[StepPoint, ...] = ()
    held_out: tuple[tuple[int, float], ...] = ()  # (step, held-out loss), step 0 is before training
    stats: RunStats | None = None
    result: RunResult | None = None
    error: RunError | None = None
    plan: RunPlan | None = None
    checkpoint_step: int = 0  # the last step a checkpoint was saved at
    sitting_from: int = 0  # index in ``steps`` of the first step since the trainer last (re)started
    probe: RunProbe | None = None

    @property
    def step(self) -> int:
        return self.steps[-1].step if self.steps else 0

    @property
    def step_s(self) -> float | None:
        """Seconds a step takes at the pace of the steps taken in this sitting (a resumed run restarts the clock);
        None until two steps are taken."""
        sitting = self.steps[self.sitting_from :]
        if len(sitting) < 2:
            return None
        first, last = sitting[0], sitting[-1]
        taken = last.step - first.step
        if taken <= 0 or last.elapsed_s <= first.elapsed_s:
            return None
        return (last.elapsed_s - first.elapsed_s) / taken

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the pace of this sitting's steps."""
        pace = self.step_s
        if pace is None or not self.total_steps:
            return None
        return (self.total_steps - self.step) * pace

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
    stats: RunStats | None = None
    plan: RunPlan | None = None
    result: RunResult | None = None
    probe: RunProbe | None = None
    error: RunError | None = None
    checkpoint = 0
    sitting_from = 0
    end: State | None = None
    for event in events:
        kind = event.get("kind")
        if kind == "started":
            end, error = None, None
            sitting_from = len(steps)  # a resumed sitting: the clock for the ETA starts again
        elif kind == "phase":
            phase = str(event.get("message", ""))
        elif kind == "stats":
            stats = record_of(RunStats, event)
            total = stats.total_steps or total
        elif kind == "plan":
            plan = record_of(RunPlan, event)
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
            probe = record_of(RunProbe, event)
        elif kind == "checkpoint":
            checkpoint = int(event["step"])
        elif kind == "finished":
            end, result = "finished", record_of(RunResult, event)
        elif kind == "failed":
            end, error = "failed", record_of(RunError, event)
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
