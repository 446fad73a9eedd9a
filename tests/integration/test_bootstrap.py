"""The llama-cpp-python wheel is built once per machine and set of llama.cpp flags: `packaging/bootstrap.sh --plan`
says what `make` would do, and after `make test` has set this checkout up it would neither install nor build again;
on a machine with nothing prepared it would build, and once the wheel is kept, reuse it."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP = ROOT / "packaging" / "bootstrap.sh"


def plan(**env: str) -> list[str]:
    ran = subprocess.run(
        ["bash", str(BOOTSTRAP), "--plan"],
        env={**os.environ, "HEARTH_EXTRAS": "dev,test-models", **env},  # as `make setup-test` runs it
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.splitlines()


def test_after_make_test_set_this_checkout_up_a_second_run_neither_installs_nor_builds() -> None:
    environment, wheel = plan()
    assert environment == f"environment: ready in {ROOT / '.venv'}"
    assert wheel.startswith("llama-cpp-python: reuse the wheel kept in "), wheel


def test_a_machine_with_nothing_prepared_builds_the_wheel_once_then_reuses_it(tmp_path: Path) -> None:
    fresh = {"VENV": str(tmp_path / "venv"), "HEARTH_WHEEL_CACHE": str(tmp_path / "wheels")}
    environment, wheel = plan(**fresh)
    assert environment == f"environment: install into {tmp_path / 'venv'}"
    built = re.fullmatch(r"llama-cpp-python: build it into (\S+)", wheel)
    assert built is not None, wheel
    folder = Path(built.group(1))
    assert folder.parent == tmp_path / "wheels"  # one folder per version and flavour (flags, patches)
    assert not (tmp_path / "venv").exists() and not folder.exists()  # a plan changes nothing

    folder.mkdir(parents=True)  # what the build leaves
    version = folder.name.removeprefix("llama-cpp-python-").split("-")[0]
    (folder / f"llama_cpp_python-{version}-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
    assert plan(**fresh)[1] == f"llama-cpp-python: reuse the wheel kept in {folder}"
