"""Kubernetes label and field selectors: parsing and matching, as the API server does them."""

import re
from collections.abc import Callable, Mapping
from typing import Any

Matcher = Callable[[dict[str, Any]], bool]

_SET_RE = re.compile(r"^\s*(!?)([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)\s*$")


class SelectorError(ValueError):
    """The selector string does not parse (the API answers 400 BadRequest)."""


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in parts if p.strip()]


def _label_requirement(term: str) -> Callable[[Mapping[str, str]], bool]:
    if m := _EQ_RE.match(term):
        key, op, value = m.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if m := _SET_RE.match(term):
        negate, key, op, values = m.groups()
        if op:
            if negate:
                raise SelectorError(f"unable to parse requirement: {term!r}")
            allowed = {v.strip() for v in values.split(",") if v.strip()}
            if op == "in":
                return lambda labels: labels.get(key) in allowed
            return lambda labels: labels.get(key) not in allowed
        if negate:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise SelectorError(f"unable to parse requirement: {term!r}")


def label_matcher(selector: str | None) -> Matcher:
    """A predicate on objects for a labelSelector (=, ==, !=, in, notin, exists, !exists)."""
    requirements = [_label_requirement(term) for term in _split(selector or "")]

    def matches(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(req(labels) for req in requirements)

    return matches


def _field_value(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def field_matcher(selector: str | None) -> Matcher:
    """A predicate for a fieldSelector (=, ==, != on dotted paths such as involvedObject.name)."""
    terms = []
    for term in _split(selector or ""):
        m = _EQ_RE.match(term)
        if not m:
            raise SelectorError(f"invalid field selector: {term!r}")
        terms.append(m.groups())

    def matches(obj: dict[str, Any]) -> bool:
        return all((_field_value(obj, path) == value) == (op != "!=") for path, op, value in terms)

    return matches
