"""Whether a setting's value has its JSON type, and a message saying what it should be."""

from __future__ import annotations

from typing import Any


def type_error(name: str, value: Any, expected: str) -> str | None:
    """A message when `value` is not of the JSON type `expected` for setting `name`."""
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float)
        and not isinstance(value, bool)
        and (isinstance(value, float) or abs(value) < 2**1023),  # float() would overflow
        "boolean": isinstance(value, bool),
        "array": isinstance(value, list) and all(isinstance(v, str) for v in value),
    }[expected]
    if ok:
        return None
    shown = {
        "array": "a list of strings",
        "integer": "an integer",
    }.get(expected, f"a {expected}")
    return f"{name}: must be {shown}, got {short_repr(value)}"


def short_repr(value: Any, limit: int = 80) -> str:
    """repr() cut to `limit` characters (an int past Python's digit limit has none)."""
    try:
        text = repr(value)
    except ValueError:
        return "an integer too long to print"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
