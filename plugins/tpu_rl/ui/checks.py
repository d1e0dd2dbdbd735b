"""The values a row of the RL page reads from Airflow's DB, parsed and checked one by one.

Each check returns the value it was given or raises Malformed with a sentence saying what is
wrong, so a value of the wrong shape costs its run's row that value (and an `error` saying so),
never the page: tasks write the summaries' parts (tpu_rl.run_summary), but so can anyone with
the API's XCom endpoints, and other versions of the package may write other shapes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from airflow.models.xcom import XComModel

from tpu_rl.settings.choices import EVAL_METRICS


class Malformed(ValueError):
    """A value the page cannot read; the message says what is wrong with it."""


def parsed(text: str | None) -> Any:
    """A JSON column's value read as text (one bad value must not fail the whole query, as
    SQLAlchemy's JSON type would while fetching), then decoded as Airflow decodes an XCom
    (XComModel.deserialize_value, airflow/models/xcom.py: a JSON text inside is loaded again)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise Malformed(f"unparseable JSON ({error})") from None
    return XComModel.deserialize_value(SimpleNamespace(value=value))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    kinds = {dict: "an object", list: "a list", str: "a text", int: "a number", float: "a number"}
    return kinds.get(type(value), type(value).__name__)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _expect(value: Any, what: str, fits: bool) -> None:
    if not fits:
        raise _malformed(value, what)


def _malformed(value: Any, what: str) -> Malformed:
    return Malformed(f"{what} is {_kind(value)}")


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _malformed(value, f"{what} should be an object but")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise _malformed(value, f"{what} should be a list but")
    return value


def _numbers(value: dict[str, Any], keys: tuple[str, ...], what: str, whole: bool = False) -> None:
    """Each of `keys` in `value` is absent, null or a number (`whole`: an integer)."""
    for key in keys:
        item = value.get(key)
        fits = item is None or (_is_number(item) and (not whole or isinstance(item, int)))
        _expect(item, f"{what}'s {key} should be {'an integer' if whole else 'a number'} but", fits)


def rewards(value: Any) -> dict[str, Any]:
    """wait_for_rewards' return value: {"pre": metrics, "post": metrics, "attempts": [...]}."""
    found = _object(value, "the value")
    for side in ("pre", "post"):
        if found.get(side) is not None:
            _numbers(_object(found[side], side), EVAL_METRICS, side)
    for i, item in enumerate(_list(found.get("intermediate") or [], "intermediate"), start=1):
        line = _object(item, f"evaluation {i}")
        _numbers(line, EVAL_METRICS, f"evaluation {i}")
        _numbers(line, ("step",), f"evaluation {i}", whole=True)
    if found.get("attempts") is not None:
        attempts(found["attempts"])
    return found


def attempts(value: Any) -> list[dict[str, Any]]:
    """The training attempts (tpu_rl.checkpoints.resume.History.attempts)."""
    found = _list(value, "the value")
    for i, item in enumerate(found, start=1):
        attempt = _object(item, f"attempt {i}")
        _numbers(attempt, ("tpu_hosts",), f"attempt {i}")
        _numbers(attempt, ("resumed_from_step", "reached_step"), f"attempt {i}", whole=True)
        for key in ("started", "ended"):
            stamp = attempt.get(key)
            _expect(stamp, f"attempt {i}'s {key} should be a time but", _is_time(stamp))
    return found


def rungs(value: Any) -> list[dict[str, Any]]:
    """The capacity ladder's tries (tpu_rl.cluster.climb): rung, times, outcome, GKE's reason."""
    found = _list(value, "the value")
    for i, item in enumerate(found, start=1):
        tried = _object(item, f"rung {i}")
        for key in ("rung", "outcome"):
            text = tried.get(key)
            _expect(text, f"rung {i}'s {key} should be a text but", isinstance(text, str))
        for key in ("started", "ended"):
            stamp = tried.get(key)
            _expect(stamp, f"rung {i}'s {key} should be a time but", _is_time(stamp))
    return found


def _is_time(value: Any) -> bool:
    if value is None:
        return True
    try:
        return datetime.fromisoformat(value).tzinfo is not None
    except (TypeError, ValueError):
        return False


def gate(value: Any) -> dict[str, Any]:
    """The reward gate's return value: {"gain": number, "checkpoint": {"step": int, ...}, ...}."""
    found = _object(value, "the value")
    _numbers(found, ("gain",), "the gate")
    if found.get("checkpoint") is not None:
        choice = _object(found["checkpoint"], "the gate's checkpoint")
        _numbers(choice, ("step", "final_step"), "the gate's checkpoint", whole=True)
    return found


def export_uri(value: Any) -> str:
    """verify's return value: the export's gs:// folder."""
    if isinstance(value, str) and value.startswith("gs://"):
        return value
    raise _malformed(value, "the value should be a gs:// URI but")


def checkpoint_step(value: Any) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _malformed(value, "the value should be an integer but")


def looks(value: Any) -> list[dict[str, Any]]:
    """A step's looks at the TPU nodes (tpu_rl.report.tpu_nodes.Look)."""
    found = _list(value, "the value")
    for i, item in enumerate(found, start=1):
        look = _object(item, f"look {i}")
        _expect(look.get("at"), f"look {i}'s at should be a number but", _is_number(look.get("at")))
        for name, created in _object(look.get("nodes"), f"look {i}'s nodes").items():
            _expect(created, f"node {name}'s creation should be a number but", _is_number(created))
    return found


def tpu_cost(value: Any) -> dict[str, Any]:
    """outcome's count of the run's cost (tpu_rl.report.run_cost): hours, cost, rule, price."""
    found = _object(value, "the value")
    _numbers(found, ("host_hours", "chip_hours", "estimated_cost_usd"), "the cost")
    for key in ("host_hours", "chip_hours"):
        _expect(found.get(key), f"the cost's {key} should be a number but", key in found)
    if found.get("price") is not None:
        _object(found["price"], "the cost's price")
    return found


def training_progress(value: Any) -> dict[str, Any]:
    """The wait's progress while training runs (tpu_rl.watch.progress.report_due)."""
    found = _object(value, "the progress")
    _numbers(found, ("step", "total_steps"), "the progress", whole=True)
    _numbers(found, ("steps_per_hour", "spent_usd", "projected_usd"), "the progress")
    _expect(found.get("step"), "the progress's step should be a number but", "step" in found)
    return found


def curves(value: Any) -> dict[str, Any]:
    """The training's curves (tpu_rl.watch.curves): [step, value] pairs per tag, the saves."""
    found = _object(value, "the curves")
    for key in ("series", "last"):
        for tag, points in _object(found.get(key) or {}, f"the curves' {key}").items():
            pairs = _list(points, tag) if key == "series" else [points]
            for pair in pairs:
                fits = isinstance(pair, list) and len(pair) == 2 and all(map(_is_number, pair))
                _expect(pair, f"a point of {tag} should be [step, value] but", fits)
    for step in _list(found.get("saves") or [], "the saves"):
        _expect(step, "a save should be a step but", isinstance(step, int))
    return found


def anomaly(value: Any) -> dict[str, Any]:
    """A fatal training health rule's record (tpu_rl.watch.health.Anomaly, with the healthy
    checkpoint WaitForRewardsSensor adds): the fields the page's line reads (health.describe)."""
    found = _object(value, "the anomaly")
    for key in ("rule", "why"):
        text = found.get(key)
        _expect(text, f"the anomaly's {key} should be a text but", isinstance(text, str))
    _numbers(found, ("step", "anomaly_step", "healthy_step"), "the anomaly", whole=True)
    for key in ("step", "anomaly_step"):
        _expect(found.get(key), f"the anomaly's {key} should be a number but", key in found)
    return found


def heldout_report(value: Any) -> dict[str, Any] | None:
    """evaluate_heldout's return value (tpu_rl.heldout.report.HeldoutReport.as_dict): the best
    step, each scored step's accuracy, a row per benchmark with its paired counts, the level;
    None when it pushed none."""
    if value is None:
        return None
    found = _object(value, "the report")
    _expect(
        found.get("step"),
        "the report's step should be an integer but",
        _is_integer(found.get("step")),
    )
    alpha: Any = found.get("alpha")
    if not (_is_number(alpha) and 0 < alpha < 1):
        raise Malformed(f"the report's alpha should be between 0 and 1 but is {alpha!r}")
    for scored, score in _object(found.get("step_scores"), "the report's step_scores").items():
        if not scored.isdigit():
            raise Malformed(f"the report's scored step {scored!r} is not a step number")
        _expect(score, f"step {scored}'s score should be a number but", _is_number(score))
    for i, item in enumerate(_list(found.get("rows"), "the report's rows"), start=1):
        row, what = _object(item, f"benchmark {i}"), f"benchmark {i}"
        fields = (
            ("task", "a text", isinstance(row.get("task"), str)),
            ("guard", "a boolean", isinstance(row.get("guard"), bool)),
            ("items", "an integer", _is_integer(row.get("items"))),
            ("candidate", "a number", _is_number(row.get("candidate"))),
        )
        for key, kind, fits in fields:
            _expect(row.get(key), f"{what}'s {key} should be {kind} but", fits)
        _numbers(row, ("base", "champion"), what)
        for key in ("vs_base", "vs_champion"):
            counts = row.get(key)
            fits = counts is None or (
                isinstance(counts, list)
                and len(counts) == 4
                and all(_is_integer(c) and c >= 0 for c in counts)
                and sum(counts) > 0
            )
            _expect(counts, f"{what}'s {key} should be four counts of items but", fits)
    return found


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def failure_message(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise _malformed(value, "the value should be a text but")


def summary_part(value: Any) -> dict[str, Any]:
    """A task's part of the run's summary: an object of its fields."""
    return _object(value, "the part")


def conf(value: Any) -> dict[str, Any]:
    """A run's conf: an object (null for none)."""
    return {} if value is None else _object(value, "the run's conf")


# The check of each field of the run's summary a row reads, by its name (tpu_rl.run_summary:
# FIELDS and PER_TASK).
CHECKS: dict[str, Callable[[Any], Any]] = {
    "rewards": rewards,
    "attempts": attempts,
    "progress": training_progress,
    "anomaly": anomaly,
    "rungs": rungs,
    "gate": gate,
    "export_uri": export_uri,
    "checkpoint_step": checkpoint_step,
    "looks": looks,
    "failure": failure_message,
    "cost": tpu_cost,
}
