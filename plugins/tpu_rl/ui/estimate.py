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
    if not isinstance(conf, dict):
        return _refused(NOT_AN_OBJECT)
    settings, errors = read_settings(conf)
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


def _refused(problem: str) -> dict[str, Any]:
    return {"errors": [problem], "warnings": [], "estimate": None, "withheld_by": []}
