"""Every integration and browser test file has an entry in the suite's time record (bench/data/suite-time.files.json,
written by bench/suite_time.py after `make test`), so what a new file costs the suite is seen when it is added."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "bench" / "data" / "suite-time.files.json"


def test_every_integration_and_e2e_file_has_its_time_recorded() -> None:
    recorded = json.loads(RECORD.read_text())["files"]
    files = sorted(
        path.relative_to(ROOT).as_posix()
        for part in ("integration", "e2e")
        for path in (ROOT / "tests" / part).glob("test_*.py")
    )
    missing = [path for path in files if path not in recorded]
    assert not missing, (
        "these test files have no time in bench/data/suite-time.files.json: run `make test` (this check comes last, "
        "after every part has left its times in test-artifacts/), then `.venv/bin/python bench/suite_time.py`, and "
        f"commit the record: {missing}"
    )


def test_the_record_says_how_and_where_it_was_made() -> None:
    record = json.loads(RECORD.read_text())
    assert record["command"] and record["commit"] and record["machine"]["cores"]
    assert set(record["parts"]) == {"unit", "integration", "e2e"}
    for part in record["parts"].values():
        assert part["wall_s"] > 0 and part["tests"] > 0 and len(part["load_average"]) == 3
