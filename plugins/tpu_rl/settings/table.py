"""The settings reference, docs/settings.md, generated from the settings' declaration; a test
fails when the file is stale.

Usage: python -m tpu_rl.settings.table docs/settings.md
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from tpu_rl.settings.fields import SETTING_FIELDS
from tpu_rl.settings.metadata import Section, default_of, describe, json_type, plain
from tpu_rl.settings.text_rules import MAX_LIST_ITEMS

INTRO = """# Settings

The DAG's Params (the trigger form, in these sections), the same names in a JSON file for
`make plan`. Names are the tutorial's variables and MaxText's flags in lower case, dots as
underscores. An unknown key is an error (naming the closest setting). Only the settings marked
required must be filled; a field emptied in the form (null in JSON) takes its default, or stays
empty where the setting may be empty. The first section, "Run Parameters", holds what the
tutorial has you change and is the one the form opens. Every rule is checked before any cloud
call, and every error is reported at once.

Generated from the settings' declaration, `plugins/tpu_rl/settings/fields.py`, by
`python -m tpu_rl.settings.table docs/settings.md` (a test keeps it current).
"""


def value_type(f: dataclasses.Field[Any]) -> str:
    """A setting's JSON type, with its choices, bounds or length limit and characters."""
    if choices := f.metadata["choices"]:
        return "one of " + ", ".join(f"`{member.value}`" for member in choices)
    if bounds := f.metadata["bounds"]:
        return f"integer, {bounds[0]} to {bounds[1]}"
    if (floor := f.metadata["at_least"]) is not None:
        return f"number, {floor:g} or more"
    if text := f.metadata["text"]:
        limit = f"at most {text.max_length} characters of {text.what}"
        if json_type(f) == "array":
            return f"list of at most {MAX_LIST_ITEMS} strings, each {limit}"
        return f"string, {limit}"
    return json_type(f)


def settings_table(section: Section) -> str:
    """The table of one form section's settings."""
    rows = ["| setting | type | default | what it is |", "|---|---|---|---|"]
    for name, f in SETTING_FIELDS.items():
        if f.metadata["section"] is not section:
            continue
        shown = "required" if f.metadata["required"] else f"`{json.dumps(plain(default_of(f)))}`"
        rows.append(f"| `{name}` | {value_type(f)} | {shown} | {describe(f)} |")
    return "\n".join(rows) + "\n"


def settings_document() -> str:
    """docs/settings.md: the introduction, then one table per form section."""
    parts = [INTRO, *(f"\n## {section.value}\n\n{settings_table(section)}" for section in Section)]
    return "".join(parts)


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(settings_document())
    print(f"wrote {target}")
