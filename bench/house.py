"""How the house stands: module and function sizes, the selection module's size, the layering's exceptions.

    .venv/bin/python bench/house.py [--out bench/data/house.LABEL.txt]

Counts physical lines of the product's Python (app/, backends/, rag/, models/), the way `wc -l` does. A function's
size is from its ``def`` (or first decorator) to its last line, nested functions included in their parent. The
layering's exceptions are the ``ignore_imports`` of the first import-linter contract in pyproject.toml.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("app", "backends", "rag", "models")
MODULE_LIMIT = 500
FUNCTION_LIMIT = 80


def product_modules() -> list[Path]:
    return sorted(path for package in PRODUCT for path in (ROOT / package).rglob("*.py"))


def functions(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function not nested in another function."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                yield f"{prefix}{child.name}", (child.end_lineno or child.lineno) - first + 1
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")

    return walk(tree, "")


def layering() -> str:
    """What lint-imports says of the contracts (one line each)."""
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True
    )
    kept = [line.strip() for line in done.stdout.splitlines() if " KEPT" in line or " BROKEN" in line]
    return "; ".join(kept) or done.stdout.strip().splitlines()[-1]


def long_modules() -> list[tuple[int, str]]:
    """(lines, path) of each product module over the limit, longest first."""
    sizes = ((len(path.read_text(encoding="utf-8").splitlines()), path) for path in product_modules())
    return sorted(((n, str(path.relative_to(ROOT))) for n, path in sizes if n > MODULE_LIMIT), reverse=True)


def long_functions() -> list[tuple[int, str]]:
    """(lines, path:name) of each product function over the limit, longest first."""
    found: list[tuple[int, str]] = []
    for path in product_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(ROOT)
        found += [(n, f"{rel}:{name}") for name, n in functions(tree) if n > FUNCTION_LIMIT]
    return sorted(found, reverse=True)


def report() -> list[str]:
    modules = product_modules()
    sizes = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in modules}
    too_long, functions_too_long = long_modules(), long_functions()
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    ignored = contracts["contracts"][0].get("ignore_imports", [])
    top_level = {
        package: sum(1 for p in (ROOT / package).glob("*.py") if p.name != "__init__.py")
        for package in (*PRODUCT, "app/services")
    }
    return [
        f"product modules: {len(modules)}, lines: {sum(sizes.values())}",
        "loose modules at the top of each package: " + ", ".join(f"{k} {v}" for k, v in top_level.items()),
        f"backends/selection.py: {sizes.get(ROOT / 'backends' / 'selection.py', 0)} lines",
        f"exceptions to the layers contract: {len(ignored)} ignore_imports entries; lint-imports: {layering()}",
        f"modules over {MODULE_LIMIT} lines: {len(too_long)}",
        *(f"  {n:5d} {name}" for n, name in too_long),
        f"functions over {FUNCTION_LIMIT} lines: {len(functions_too_long)}",
        *(f"  {n:5d} {name}" for n, name in functions_too_long),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    args = parser.parse_args(argv)
    lines = report()
    sys.stdout.write("\n".join(lines) + "\n")
    if args.out:
        args.out.write_text("# .venv/bin/python bench/house.py\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
