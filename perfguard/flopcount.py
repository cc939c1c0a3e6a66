"""A user kernel's flop count: `flops = "2 * M * N * K"` over its params, or "module:function".

The expression is parsed, never handed to eval: numbers, the kernel's numeric params, + - * /
// % **, parentheses, min() and max(). Anything else (attributes, other calls, strings) is an
input error naming the key. A "module:function" is called as function(**params) when the job runs.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any

from perfguard.errors import InputError, did_you_mean
from perfguard.user_code.imports import callable_parts

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCTIONS = {"min": min, "max": max}
_LIMIT = 1e30  # far above any kernel's work; keeps ** from building huge integers


def parse(value: Any, params: dict[str, Any], where: str) -> str:
    """Validate the config value (evaluating an expression once against the params); returns it as text."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InputError(
            f"{where}: must be an expression over params (\"2 * M * N * K\") or 'module:function', got {value!r}"
        )
    text = str(value)
    if callable_parts(text) is None:
        evaluate(text, params, where)
    return text


def evaluate(text: str, params: dict[str, Any], where: str) -> int:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise InputError(f"{where}: '{text}' is not an arithmetic expression") from None
    value = _eval(tree.body, params, where, text)
    return count(value, where)


def count(value: Any, where: str) -> int:
    """A flop count as an int; refuses what no count can be."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InputError(f"{where}: must come to a finite number >= 0, got {value!r}")
    return int(round(value))


def _eval(node: ast.AST, params: dict[str, Any], where: str, text: str) -> float | int:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        value = params.get(node.id)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            numeric = sorted(k for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
            raise InputError(
                f"{where}: '{node.id}' is not a numeric param{did_you_mean(node.id, numeric)} "
                f"(params: {', '.join(numeric) or 'none'})"
            )
        return value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _eval(node.operand, params, where, text)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, params, where, text), _eval(node.right, params, where, text)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > _LIMIT):
            raise InputError(f"{where}: '{text}': exponent or base too large")
        try:
            result = _BINARY[type(node.op)](left, right)
        except (ZeroDivisionError, OverflowError) as exc:
            raise InputError(f"{where}: '{text}': {exc}") from None
        if isinstance(result, complex) or abs(result) > _LIMIT:
            raise InputError(f"{where}: '{text}' comes to a value out of range")
        return result
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
        and node.args
    ):
        return _FUNCTIONS[node.func.id](_eval(a, params, where, text) for a in node.args)
    raise InputError(f"{where}: '{text}': only numbers, params, + - * / // % **, min() and max() are allowed")
