"""The self-contained build's entry point runs Hearth's children as Python would (``-m``, ``-I SCRIPT``, ``-c``)
and is the ``hearth`` command otherwise; checked here by running the entry script with this interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "packaging" / "bundle_entry.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ENTRY), *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_module_runs_as_main_with_its_own_arguments() -> None:
    ran = _run("-m", "app", "api-key", "--help")
    assert ran.returncode == 0, ran.stderr
    assert "usage: hearth api-key" in ran.stdout


def test_a_module_exit_status_is_kept() -> None:
    ran = _run("-m", "app", "no-such-command")
    assert ran.returncode == 2
    assert "invalid choice" in ran.stderr


def test_a_script_runs_by_path_with_its_arguments(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text("import sys\nprint('worker', __name__, sys.argv[1:])\n")
    ran = _run("-I", str(script), "4096")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "worker __main__ ['4096']"


def test_code_runs_as_python_c_would() -> None:
    ran = _run("-c", "import sys; print(__name__, sys.argv)", "x")
    assert ran.stdout.strip() == "__main__ ['-c', 'x']"
    failed = _run("-c", "raise SystemExit(3)")
    assert failed.returncode == 3


def test_anything_else_is_the_hearth_command_line() -> None:
    ran = _run("--help")
    assert ran.returncode == 0 and "usage: hearth" in ran.stdout
