"""The tutorial's own commands, read out of its text, for flag-by-flag comparisons."""

from __future__ import annotations

import re
import shlex

from tests.conftest import SEED


def tutorial_python_flags(module: str, variables: dict[str, str]) -> list[str]:
    """The flags the tutorial passes to `python3 -m <module>`, its ${VARS} filled in."""
    text = SEED.read_text()
    start = text.index(f"python3 -m {module}") + len(f"python3 -m {module}")
    end = text.index('"\n', start)  # the closing quote of --command="..."
    body = text[start:end].replace("\\\n", " ").replace('\\"', '"').replace("\\$", "$")
    body = re.sub(r"\$\{(\w+)(:[?-][^}]*)?\}", lambda m: variables[m.group(1)], body)
    return shlex.split(body)


def as_mapping(flags: list[str]) -> dict[str, str]:
    """{'key': 'value'} from key=value flags; bare flags map to ''."""
    return dict([*f.split("=", 1), ""][:2] for f in flags)


def same_value(a: str, b: str) -> bool:
    """Equal as MaxText reads them: booleans ignore case, numbers compare as numbers."""
    if a.lower() in ("true", "false"):
        return a.lower() == b.lower()
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b
