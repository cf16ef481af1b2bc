"""JSON from outside, parsed within bounds, so a hostile body is a 400 and not a 500.

Python's ``json`` recurses once per level of nesting (a RecursionError long before a body's size
limit) and makes every integer literal an ``int`` (a ValueError past 4300 digits, and slow well
before that). Here an integer literal past the bound is never converted, and nesting is checked
while parsing (the recursion limit) and after it (the bound).
"""

from __future__ import annotations

import json
from typing import Any


class JSONBoundsError(ValueError):
    """The document nests too deep or holds too long an integer; the message says where."""


class _LongInteger(str):
    """An integer literal past the bound, kept as text until it is reported."""


def loads(raw: bytes | str, *, max_depth: int, max_int_digits: int) -> Any:
    """``json.loads``, refusing nesting past ``max_depth`` and integers past ``max_int_digits``.

    Raises ``JSONBoundsError`` for a bound, and what ``json.loads`` raises for invalid JSON.
    """

    def parse_int(literal: str) -> int | _LongInteger:
        digits = len(literal) - literal.startswith("-")
        return _LongInteger(literal) if digits > max_int_digits else int(literal)

    try:
        data = json.loads(raw, parse_int=parse_int)
    except RecursionError:
        raise JSONBoundsError(f"the body nests deeper than {max_depth} levels") from None
    _check(data, max_depth, max_int_digits)
    return data


def _check(data: Any, max_depth: int, max_int_digits: int) -> None:
    # Iterative, since the document may be as deep as the recursion limit allowed.
    stack: list[tuple[Any, str, int]] = [(data, "", 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, _LongInteger):
            raise JSONBoundsError(
                f"{path or 'the body'} must be an integer of at most {max_int_digits} digits"
            )
        if isinstance(value, dict):
            children = [(item, f"{path}.{key}" if path else key) for key, item in value.items()]
        elif isinstance(value, list):
            children = [(item, f"{path}[{index}]") for index, item in enumerate(value)]
        else:
            continue
        if depth > max_depth:
            raise JSONBoundsError(f"the body nests deeper than {max_depth} levels")
        stack.extend((item, where, depth + 1) for item, where in reversed(children))
