"""The estimate page's answer for a run's settings, as the trigger form's Configuration JSON holds
them: every problem validate would name, the warnings of valid settings, and the short table
the form shows for its defaults (tpu_rl.report.estimate.short_table), computed for these.

The time limits against the DAG's dagrun_timeout and the deployment's connections are checked by
the run's validate step only (tpu_rl.dag.run_checks): they read the deployment, not the settings.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from tpu_rl.report.estimate import FIGURE_SETTINGS, TABLE_COLUMNS, estimate_run, short_table
from tpu_rl.report.spend_limit import estimate_problem
from tpu_rl.settings.run_settings import read_settings
from tpu_rl.settings.validation import setting_of, settings_warnings

# no setting nests deeper than a list or an object of plain values; this leaves room, and bounds
# what the checks below read (Python's JSON reader and repr recurse, and fail past ~1000 levels)
MAX_DEPTH = 16
NOT_AN_OBJECT = (
    "the settings must be a JSON object of setting names and values, as the trigger form's "
    "Advanced Options > Configuration JSON shows them"
)


def settings_estimate(text: str) -> dict[str, Any]:
    """What the page shows for the settings `text` holds as JSON: `errors` (all of them,
    validate's order, then the spend limit's), `warnings` (of valid settings), `estimate` (the
    short table; None while a setting its figures come from is invalid) and `withheld_by`
    (those settings)."""
    try:
        conf = json.loads(text)
    except ValueError as err:  # JSONDecodeError, or an integer past Python's digit limit
        return _refused(f"not valid JSON ({err})")
    except RecursionError:
        return _refused(f"not valid settings: JSON nested more than {MAX_DEPTH} levels deep")
    if not isinstance(conf, dict):
        return _refused(NOT_AN_OBJECT)
    if deep := [name for name, value in conf.items() if _too_deep(value)]:
        return _refused(*(f"{name}: nested more than {MAX_DEPTH} levels deep" for name in deep))
    try:
        settings, errors = read_settings(conf)
    except RecursionError:  # a string of JSON nested past Python's reader (vllm_hf_overrides)
        return _refused("not valid settings: a setting's JSON text nests too deeply to read")
    named = {setting_of(problem) for problem in errors}
    withheld_by = sorted(named & FIGURE_SETTINGS)
    table = None
    if not withheld_by:
        table = {"columns": list(TABLE_COLUMNS), **asdict(short_table(estimate_run(settings)))}
        # validate's own check of the estimate against max_spend_usd (operators/checks.py)
        if "max_spend_usd" not in named and (over := estimate_problem(settings)):
            errors.append(over)
    return {
        "errors": errors,
        "warnings": [] if errors else settings_warnings(settings),
        "estimate": table,
        "withheld_by": withheld_by,
    }


def _too_deep(value: Any) -> bool:
    """Whether a setting's value nests lists or objects more than MAX_DEPTH levels deep."""
    level = [value]
    for _ in range(MAX_DEPTH):
        level = [v for c in level if isinstance(c, list | dict) for v in _items(c)]
    return any(isinstance(c, list | dict) for c in level)


def _items(container: list[Any] | dict[str, Any]) -> list[Any]:
    """A list's items or an object's values."""
    return list(container.values()) if isinstance(container, dict) else container


def _refused(*problems: str) -> dict[str, Any]:
    """The answer to a body whose settings cannot be read: its problems, no estimate."""
    return {"errors": list(problems), "warnings": [], "estimate": None, "withheld_by": []}
