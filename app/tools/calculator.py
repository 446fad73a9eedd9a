"""The built-in calculator tool: arithmetic evaluated exactly, without ``eval``.

The expression is parsed by Python's own parser (``ast``, which runs nothing) and only numbers, + - * / // % **,
unary signs and parentheses are read; anything else (a name, a call, an attribute, a string) is refused with what
was found. Percentages are read as people write them (models copy the request's words): ``17.5% of 2340`` and
``17.5% * 2340`` are 17.5/100 of it, ``84 + 15%`` is 84 and 15% more (``-`` less), as a desk calculator does; a
``%`` between two numbers stays the remainder (``10 % 3``). Numbers are exact fractions (0.1 + 0.2 is 0.3), a
result that is not a whole number is given as a decimal when it ends, else as a fraction with its decimal value to
20 digits. Powers and sizes are bounded so an
expression cannot take the machine (9**9**9 is refused, not computed).
"""

from __future__ import annotations

import ast
import re
from decimal import Decimal, InvalidOperation, localcontext
from fractions import Fraction

from backends.base import ToolSpec

SPEC = ToolSpec(
    "calculator",
    # Worded so that its embedding is near arithmetic requests and far from greetings (app/tools/relevance.py).
    # (An example with a percentage made Qwen2.5-Coder-1.5B add 15% to a plain product: bench/tool_answers.py.)
    "Compute arithmetic exactly, for sums, products, divisions, powers and percentages: 12 * 7, (3 + 4) ** 2.",
    # maxLength holds a small model's runaway string to a call that still ends within an answer's tokens.
    '{"type": "object", "properties": {"expression": {"type": "string", "maxLength": 200, '
    '"description": "the arithmetic, with the numbers of the request"}},'
    ' "required": ["expression"]}',
)
MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 10_000
MAX_DIGITS = 10_000  # of a numerator or denominator


class CalculationError(ValueError):
    """The expression cannot be evaluated; the message says why, for the model to read."""


def calculate(expression: str) -> str:
    """The exact value of ``expression``, as text."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculationError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    source = with_percentages(expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/"))
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        raise CalculationError(f"{expression!r} is not an arithmetic expression") from None
    return shown(_value(tree.body, source))


PERCENT = "_percent"  # N% becomes _percent(N), read by _value alone
_WORDS = re.compile(r"(\d(?:[\d_]*\d)?(?:\.\d+)?)\s*(?:per\s*cent|percent)\b", re.IGNORECASE)
# a number and % not followed by another number or an opening parenthesis (that is the remainder: 10 % 3)
_SIGN = re.compile(r"(\d(?:[\d_]*\d)?(?:\.\d+)?)\s*%(?!\s*[\d.(])")
_OF = re.compile(r"(\))\s*of\b", re.IGNORECASE)


def with_percentages(source: str) -> str:
    """``source`` with each percentage as people write it made a :data:`PERCENT` call, and "of" after one a
    product."""
    marked = _SIGN.sub(rf"{PERCENT}(\1)", _WORDS.sub(r"\1%", source))
    return _OF.sub(r"\1 *", marked) if PERCENT in marked else marked


def _percent(node: ast.AST) -> ast.AST | None:
    """The number inside a :data:`PERCENT` call, or None for any other node."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == PERCENT
        and len(node.args) == 1
        and not node.keywords
    ):
        return node.args[0]
    return None


def _value(node: ast.AST, source: str) -> Fraction:
    percent = _percent(node)
    if percent is not None:
        return _value(percent, source) / 100
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub) and _percent(node.right) is not None:
        base, share = _value(node.left, source), _value(node.right, source)  # 84 + 15%: 84 and 15% of it
        return _bounded(base + base * share if isinstance(node.op, ast.Add) else base - base * share)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        written = ast.get_source_segment(source, node) or repr(node.value)
        try:
            return Fraction(Decimal(written.replace("_", "")))
        except (InvalidOperation, ValueError):
            raise CalculationError(f"{written!r} is not a number") from None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        value = _value(node.operand, source)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, source), _value(node.right, source)
        return _bounded(_apply(node.op, left, right))
    found = ast.get_source_segment(source, node) or type(node).__name__
    raise CalculationError(f"only numbers and + - * / // % ** can be used, not {found!r}")


def _apply(op: ast.operator, left: Fraction, right: Fraction) -> Fraction:
    if isinstance(op, ast.Add):
        return left + right
    if isinstance(op, ast.Sub):
        return left - right
    if isinstance(op, ast.Mult):
        return left * right
    if isinstance(op, ast.Div | ast.FloorDiv | ast.Mod) and right == 0:
        raise CalculationError("division by zero")
    if isinstance(op, ast.Div):
        return left / right
    if isinstance(op, ast.FloorDiv):
        return Fraction(left // right)
    if isinstance(op, ast.Mod):
        return left % right
    if isinstance(op, ast.Pow):
        if right.denominator != 1:
            raise CalculationError("only whole-number powers are exact")
        if abs(right) > MAX_EXPONENT or (abs(left) > 1 and abs(right) * _digits(left) > MAX_DIGITS):
            raise CalculationError("the power is too large to compute")
        if left == 0 and right < 0:
            raise CalculationError("division by zero")
        return left ** int(right)
    raise CalculationError(f"the operator {type(op).__name__} cannot be used")


def _digits(value: Fraction) -> int:
    return max(len(str(abs(value.numerator))), len(str(value.denominator)))


def _bounded(value: Fraction) -> Fraction:
    if _digits(value) > MAX_DIGITS:
        raise CalculationError(f"the result has more than {MAX_DIGITS} digits")
    return value


def shown(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    if denominator == 1:  # a decimal that ends
        with localcontext() as context:
            context.prec = MAX_DIGITS
            return format(Decimal(value.numerator) / Decimal(value.denominator), "f")
    with localcontext() as context:
        context.prec = 20
        approximate = Decimal(value.numerator) / Decimal(value.denominator)
    return f"{value.numerator}/{value.denominator} (about {approximate})"
