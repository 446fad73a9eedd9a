"""The suite's own clock: each test file's time (its tests' setup, call and teardown, so a module's shared fixtures
count for the file that starts them), written when a run ends to ``test-artifacts/suite-time.PART.json``, PART being
the one whole folder the run was given (unit, integration, e2e), or "partial" for any other run (one file, ``-k``), so
a run of a few tests never overwrites a whole part's record. ``bench/suite_time.py`` turns the parts of one
whole run into the committed record, ``bench/data/suite-time.files.json``."""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("unit", "integration", "e2e")
_seconds: defaultdict[str, float] = defaultdict(float)
_tests: defaultdict[str, int] = defaultdict(int)
_started = [0.0]


def pytest_sessionstart(session: pytest.Session) -> None:
    _started[0] = time.monotonic()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    _seconds[path] += report.duration
    if report.when == "call" or (report.when == "setup" and report.skipped):
        _tests[path] += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput") or not _seconds:
        return  # a parallel worker: its reports reach the main process, which writes the file
    given = [str(arg).rstrip("/") for arg in session.config.args]
    whole = len(given) == 1 and given[0] in {f"tests/{name}" for name in PARTS} and not session.config.option.keyword
    part = given[0].split("/")[1] if whole else "partial"
    record = {
        "part": part,
        "wall_s": round(time.monotonic() - _started[0], 1),
        "exit_status": int(exitstatus),
        "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "ci": os.environ.get("CI", ""),
        "files": {path: {"seconds": round(_seconds[path], 1), "tests": _tests[path]} for path in sorted(_seconds)},
    }
    folder = ROOT / "test-artifacts"
    folder.mkdir(exist_ok=True)
    (folder / f"suite-time.{part}.json").write_text(json.dumps(record, indent=1) + "\n")
