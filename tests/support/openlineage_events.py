"""OpenLineage events as a backend receives them, judged by the schemas that ship with the
client library and ours, and read back into the run's lineage.

- The event itself: openlineage-python 1.54.0's model of the spec (client/generated/base.py,
  generated from spec/OpenLineage.json 2-0-2: `schemaURL` ".../spec/2-0-2/OpenLineage.json#/
  $defs/RunEvent"), built from the JSON field by field, so its required fields, its
  `eventType` enum and its validators (eventTime a date-time with a time, runId a UUID) judge.
- Our facets: tpu_rl.lineage.facets' schemas (facet_problems).
- Not the Airflow provider's own facets: 2.20.3's events do not keep to the JSON Schemas it
  ships beside them (facets/AirflowRunFacet.json requires a task's `pool`, which its Airflow 3
  events leave out): the provider's to mend, not ours to hold it to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from openlineage.client.generated import base

from tpu_rl.lineage.facets import KEYS, facet_problems
from tpu_rl.lineage.graph import StepLineage
from tpu_rl.lineage.names import DatasetId

OURS = {key: facet for facet, key in KEYS.items()}


def _model(event: Mapping[str, Any]) -> base.RunEvent:
    """The client's RunEvent of `event`; TypeError/ValueError/KeyError when it is not one."""

    def datasets(kind: type, found: Iterable[Mapping[str, Any]]) -> list[Any]:
        return [kind(namespace=d["namespace"], name=d["name"]) for d in found]

    return base.RunEvent(
        eventTime=event["eventTime"],
        producer=event["producer"],
        eventType=base.EventType(event["eventType"]),
        run=base.Run(runId=event["run"]["runId"]),
        job=base.Job(namespace=event["job"]["namespace"], name=event["job"]["name"]),
        inputs=datasets(base.InputDataset, event.get("inputs", [])),
        outputs=datasets(base.OutputDataset, event.get("outputs", [])),
    )


def event_problems(event: Mapping[str, Any]) -> list[str]:
    """What keeps `event` from being a valid OpenLineage run event with valid facets."""
    try:
        model = _model(event)
    except (TypeError, ValueError, KeyError) as err:
        return [f"not a RunEvent of spec 2-0-2: {err!r}"]
    problems = []
    if event.get("schemaURL") != model.schemaURL:
        problems.append(f"schemaURL {event.get('schemaURL')!r}, not {model.schemaURL!r}")
    for key, facet in (event["run"].get("facets") or {}).items():
        if key in OURS:
            problems += [f"{key}: {p}" for p in facet_problems(OURS[key], facet)]
    return problems


def job_of(event: Mapping[str, Any]) -> str:
    return event["job"]["name"]


def completed(events: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each job's COMPLETE event (the last, should a step have completed twice)."""
    return {job_of(e): e for e in events if e["eventType"] == "COMPLETE"}


def step_lineage(event: Mapping[str, Any]) -> StepLineage:
    """The inputs and outputs an event names, as the graph's StepLineage."""

    def ids(found: Iterable[Mapping[str, Any]]) -> tuple[DatasetId, ...]:
        return tuple(DatasetId(d["namespace"], d["name"]) for d in found)

    return StepLineage(ids(event.get("inputs") or []), ids(event.get("outputs") or []))


def graph_text(events: Iterable[Mapping[str, Any]]) -> str:
    """The events as a Markdown table a person reads: each job's event type, what it read and
    wrote (namespace/name), and the facets of ours it carried."""
    rows = ["| job | event | inputs | outputs | our facets |", "|---|---|---|---|---|"]
    for e in events:
        reads, writes = (
            "<br>".join(DatasetId(d["namespace"], d["name"]).fqn for d in e.get(side) or [])
            for side in ("inputs", "outputs")
        )
        ours = ", ".join(sorted(k for k in e["run"].get("facets") or {} if k in OURS))
        rows.append(f"| {job_of(e)} | {e['eventType']} | {reads} | {writes} | {ours} |")
    return "\n".join(rows) + "\n"
