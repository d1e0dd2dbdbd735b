"""The README's settings table, generated from the settings so it cannot go stale.

Usage: python -m tpu_rl.settings.table
"""

from __future__ import annotations

import json

from tpu_rl.settings.fields import SETTING_FIELDS, default_of, describe, json_type
from tpu_rl.settings.validation import REQUIRED_SETTINGS


def settings_table() -> str:
    rows = ["| setting | type | default | what it is |", "|---|---|---|---|"]
    for name, f in SETTING_FIELDS.items():
        shown = "required" if name in REQUIRED_SETTINGS else f"`{json.dumps(default_of(f))}`"
        rows.append(f"| `{name}` | {json_type(f)} | {shown} | {describe(f)} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(settings_table(), end="")
