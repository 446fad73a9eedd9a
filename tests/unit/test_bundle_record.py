"""The self-contained bundle's record (``bench/data/bundle-smoke.txt``, written by ``make package-record``) is of
the build inputs as they are now: a change to the spec, the bundle's entry point or the build and smoke scripts
after the recorded build fails here, so the change that needs a new build says so (run ``make package-record``)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
RECORD = ROOT / "bench" / "data" / "bundle-smoke.txt"
INPUT = re.compile(r"^# input: (\S+) sha256 ([0-9a-f]{64})$", re.MULTILINE)
REQUIRED = {
    "packaging/hearth.spec",
    "packaging/bundle_entry.py",
    "packaging/build-bundle.sh",
    "packaging/smoke-bundle.sh",
}


def recorded_inputs(text: str) -> dict[str, str]:
    return dict(INPUT.findall(text))


def test_the_record_reads_each_input_and_its_digest() -> None:
    text = f"# commit: abc\n# input: packaging/hearth.spec sha256 {'a' * 64}\nBuilt dist/hearth\n"
    assert recorded_inputs(text) == {"packaging/hearth.spec": "a" * 64}


def test_the_recorded_bundle_was_built_from_todays_inputs_and_passed_its_smoke_test() -> None:
    text = RECORD.read_text(encoding="utf-8")
    assert text.rstrip().endswith("smoke test passed"), f"{RECORD.name} holds no passed smoke test"
    recorded = recorded_inputs(text)
    assert set(recorded) == REQUIRED, f"{RECORD.name} names {sorted(recorded)}; run `make package-record`"
    changed = [
        name for name, digest in recorded.items() if hashlib.sha256((ROOT / name).read_bytes()).hexdigest() != digest
    ]
    assert not changed, f"{', '.join(changed)} changed after the recorded build: run `make package-record`"
