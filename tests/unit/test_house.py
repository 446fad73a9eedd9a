"""The house stays readable: no product module over 500 lines and no function over 80, measured as ``bench/house.py``
measures them, so a module or function that grows past the limit fails here, not in a review; and no comment or page
points at a tracker's issue number, which a reader of the code or the docs cannot look up."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from bench.house import FUNCTION_LIMIT, MODULE_LIMIT, functions, long_functions, long_modules

ROOT = Path(__file__).parents[2]
PRODUCT = ("app", "backends", "rag", "models", "packaging")
TRACKER = re.compile(r"\b[Ii]ssues? #?\d+\b|\b[Ss]tops? \d+\b")


def tracker_numbers(text: str) -> list[str]:
    """Each line of ``text`` that names an issue or a stop by its number."""
    return [line.strip() for line in text.splitlines() if TRACKER.search(line)]


def readable_texts() -> list[Path]:
    code = [p for folder in PRODUCT for p in (ROOT / folder).rglob("*") if p.suffix in {".py", ".sh", ".spec"}]
    return [*code, ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")]


def test_no_product_module_is_over_the_limit() -> None:
    assert long_modules() == [], f"split these modules (over {MODULE_LIMIT} lines) where they are read"


def test_no_product_function_is_over_the_limit() -> None:
    assert long_functions() == [], f"split these functions (over {FUNCTION_LIMIT} lines) where they are read"


def test_a_function_is_measured_from_its_first_decorator_with_its_nested_functions() -> None:
    source = (
        "@first\n@second\ndef outer():\n    def inner():\n        pass\n    return inner\n\n"
        "class Box:\n    def put(self):\n        pass\n"
    )
    assert dict(functions(ast.parse(source))) == {"outer": 6, "Box.put": 2}


def test_no_product_code_or_page_points_at_a_tracker_number() -> None:
    named = {
        str(path.relative_to(ROOT)): lines
        for path in readable_texts()
        if (lines := tracker_numbers(path.read_text(encoding="utf-8")))
    }
    assert named == {}, "say why in words: a reader cannot look these numbers up"


def test_a_tracker_number_is_told_from_ordinary_numbers() -> None:
    # The references are made up here from a word and a number, so that this file names none itself.
    named = [f"kept ({'issue'} 7, item 1)", f"as {'stop'} 9's note says", f"{'issues'} 12"]
    text = "\n".join([named[0], named[1], "stop the 3 workers", named[2], "tissue 4"])
    assert tracker_numbers(text) == named
