"""The house stays readable (issue 38, item 6): no product module over 500 lines and no function over 80, measured as
``bench/house.py`` measures them, so a module or function that grows past the limit fails here, not in a review."""

from __future__ import annotations

import ast

from bench.house import FUNCTION_LIMIT, MODULE_LIMIT, functions, long_functions, long_modules


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
