"""The layering holds (import-linter's contracts in pyproject.toml): app above rag above backends above models,
with today's exceptions listed there with their reasons, and the shared leaves in app importing nothing else."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(config: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(LINT), "--no-cache", *([str(config)] if config else [])]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_contracts_are_kept() -> None:
    done = _lint()
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"Contracts: \d+ kept, 0 broken", done.stdout), done.stdout


def test_an_upward_import_not_listed_breaks_them(tmp_path: Path) -> None:
    # The same contracts with one listed exception taken out: the import it allowed now fails the check.
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    layers = settings["contracts"][0]
    assert "models.fit -> backends.selection" in layers["ignore_imports"]
    kept = [line for line in layers["ignore_imports"] if line != "models.fit -> backends.selection"]
    lines = ["[importlinter]", "root_packages =", *(f"    {p}" for p in settings["root_packages"]), ""]
    lines += ["[importlinter:contract:layers]", "name = layers", "type = layers", "layers ="]
    lines += [f"    {layer}" for layer in layers["layers"]]
    lines += ["ignore_imports =", *(f"    {line}" for line in kept)]
    config = tmp_path / "contracts.ini"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = _lint(config)
    assert done.returncode != 0 and "models.fit -> backends.selection" in done.stdout, done.stdout


def test_the_exceptions_are_few_and_each_names_one_import() -> None:
    # A wildcard would let any new module of a package reach up unseen; each exception names one import, with its
    # reason in the comment above it.
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    exceptions = settings["contracts"][0]["ignore_imports"]
    assert not [line for line in exceptions if "*" in line], exceptions
    assert len(exceptions) <= 8, exceptions
