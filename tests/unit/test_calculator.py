"""The built-in calculator (app/tools/calculator.py): exact arithmetic, no eval, bounded."""

from __future__ import annotations

import pytest

from app.tools.calculator import CalculationError, calculate


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("12345 * 6789", "83810205"),
        ("0.1 + 0.2", "0.3"),
        ("(2 + 3) * 4.5", "22.5"),
        ("1 / 3", "1/3 (about 0.33333333333333333333)"),
        ("2 ** 100", "1267650600228229401496703205376"),
        ("2^10 - 24", "1000"),
        ("-7 // 2", "-4"),
        ("7 % 3", "1"),
        ("1_000 * 3", "3000"),
        ("10 ÷ 4 × 2", "5"),
        ("2 ** -2", "0.25"),
    ],
)
def test_arithmetic_is_exact(expression: str, value: str) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("__import__('os').system('id')", "only numbers"),
        ("x + 1", "only numbers"),
        ("'a' * 3", "only numbers"),
        ("1 / 0", "division by zero"),
        ("9 ** 9 ** 9", "too large"),
        ("2 ** 0.5", "whole-number powers"),
        ("1 +", "not an arithmetic expression"),
        ("1" * 600, "longer than"),
        ("True + 1", "only numbers"),
    ],
)
def test_what_is_not_arithmetic_or_too_big_is_refused_with_the_reason(expression: str, says: str) -> None:
    with pytest.raises(CalculationError, match=says):
        calculate(expression)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("17.5% of 2340", "409.5"),  # as the request says it, copied by the model
        ("17.5 % * 2340", "409.5"),
        ("2340 * 17.5%", "409.5"),
        ("12 percent of 250", "30"),
        ("84 + 15%", "96.6"),  # 84 and 15% more, as a desk calculator adds a percentage
        ("84 - 10 %", "75.6"),
        ("(84 + 15%) / 2", "48.3"),
        ("50%", "0.5"),
        ("10 % 3", "1"),  # between two numbers, % is still the remainder
        ("7 % (2)", "1"),
    ],
)
def test_percentages_are_read_as_people_write_them(expression: str, value: str) -> None:
    assert calculate(expression) == value


def test_the_description_names_the_percentages() -> None:
    from app.tools.calculator import SPEC

    assert "percentages" in SPEC.description
