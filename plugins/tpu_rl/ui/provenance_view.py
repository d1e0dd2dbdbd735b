"""The provenance of a run's export as the RL page shows it: the chain base model -> dataset ->
run -> step -> evaluation -> export -> approval -> registry version, its links, their order and
labels from tpu_rl.lineage.graph.provenance_chain, each with the OpenLineage dataset it names
(tpu_rl.lineage.names: the names the lineage events carry) and what a person reads of it, from
the records the run kept (RunRecords); no I/O (tpu_rl.ui.provenance reads them).

A record the run did not keep (a run of an older version, a task cleared since) makes its link
say so (`missing`); without the exported step nothing of the chain can be named, and the view
says why instead (NoProvenance)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from tpu_rl.heldout.report import HeldoutReport
from tpu_rl.heldout.table import benchmark_lines, verdict_line
from tpu_rl.layout import RunLayout, console_object_url, console_url
from tpu_rl.lineage.graph import ChainLink, provenance_chain, run_datasets, run_lineage
from tpu_rl.lineage.names import (
    HF_DATASETS,
    RL_YML_DATASET,
    DatasetId,
    base_model,
    hf_dataset,
    training_data,
)
from tpu_rl.names import DAG_ID, Step
from tpu_rl.promotion.approval_text import NOT_REQUIRED, approval_decision, promotion_line
from tpu_rl.promotion.champion import ChampionRecord
from tpu_rl.settings.choices import EVAL_METRICS

# The chain's last link: graph.provenance_chain has it only for a registered version; the view
# shows it either way, saying "not registered" (a test holds the two labels equal).
REGISTRY_VERSION = "registry version"
REGISTRY_KEY = "registry_version"  # the champion record's field, absent from older records


class NoProvenance(ValueError):
    """Nothing of the chain can be named: why, in a line."""


@dataclass(frozen=True)
class RunRecords:
    """What a run kept that its provenance reads; None: not kept."""

    layout: RunLayout  # validate's record: the settings and the deployment identity
    export: Mapping[str, Any] | None = None  # export's result: step, checkpoint_uri, export_uri...
    heldout: HeldoutReport | None = None  # evaluate_heldout's report
    comparison: Mapping[str, Any] | None = None  # compare_champion's result
    approval: Any = None  # approve's answer (its XCom `answer`)
    approved_at: datetime | None = None  # when approve ended
    held: str | None = None  # why approve asked a person although approval=none
    promoted: Mapping[str, Any] | None = None  # promote's result: the record written, its URI
    promote_failed: str | None = None  # the state a failed promote left


@dataclass(frozen=True)
class Reading:
    """What a person reads of a link: a line, a second one, a link; `missing`: the record it
    reads was not kept; `written`: False when the run never wrote the link's dataset."""

    text: str
    detail: str | None = None
    url: str | None = None
    missing: bool = False
    written: bool = True


def exported_step(records: RunRecords) -> int:
    """The step export took, from its result, else from the champion record promote wrote."""
    for source in (records.export, records.promoted):
        if isinstance(source, Mapping) and type(source.get("step")) is int:
            return int(source["step"])
    raise NoProvenance(
        "export kept no result naming the step it exported, and promote no champion record: "
        "no link of the chain can be named"
    )


def _recorded(records: RunRecords, field: str) -> Any:
    """A field of export's result, else of the champion record promote wrote."""
    for source in (records.export, records.promoted):
        if isinstance(source, Mapping) and source.get(field):
            return source[field]
    return None


def registry_version(records: RunRecords) -> str | None:
    """The Vertex AI version promote registered; None: none, or no promotion."""
    version = (records.promoted or {}).get(REGISTRY_KEY)
    return version if isinstance(version, str) and version else None


def provenance_links(records: RunRecords) -> list[dict[str, Any]]:
    """The chain's links in order, each {label, task, dataset ({namespace, name} or None), text,
    detail, url, missing}; NoProvenance when nothing can be named, or the records do not join
    into a chain (graph.provenance_chain's reason)."""
    step = exported_step(records)
    scored = sorted(records.heldout.step_scores) if records.heldout else []
    version = registry_version(records)
    try:
        datasets = run_datasets(
            records.layout,
            # the committed steps the records name: the exported one and those scored
            committed=sorted({step, *scored}),
            exported=step,
            scored=scored,
            registry_version=version,
        )
        chain = provenance_chain(run_lineage(datasets), datasets)
    except ValueError as err:
        raise NoProvenance(str(err)) from None
    rows = [_row(link, READERS[link.label](records, link)) for link in chain]
    if version is None:
        rows.append(_row(ChainLink(REGISTRY_VERSION, Step.PROMOTE, None), _unregistered(records)))
    return rows


def _row(link: ChainLink, reading: Reading) -> dict[str, Any]:
    dataset = link.dataset if reading.written else None
    return {
        "label": link.label,
        "task": str(link.step),
        "dataset": dataset.as_dict() if dataset else None,
        "text": reading.text,
        "detail": reading.detail,
        "url": reading.url,
        "missing": reading.missing,
    }


def _hub_page(dataset: DatasetId) -> str:
    """The Hub's page of a model or dataset: its name without the revision, after the Hub's
    address (names.py: `namespace/name` reads as its Hub URL)."""
    return f"{dataset.namespace}/{dataset.name.rpartition('@')[0]}"


def _base_model(records: RunRecords, link: ChainLink) -> Reading:
    model = base_model(records.layout)  # the link's dataset: run_datasets names it so
    detail = f"converted by convert into {records.layout.maxtext_dir}"
    return Reading(model.name, detail, _hub_page(model))


def _dataset(records: RunRecords, link: ChainLink) -> Reading:
    data = training_data(records.layout)
    named = (
        "MaxText's default for RL (rl.yml dataset_name)"
        if data == hf_dataset(RL_YML_DATASET)
        else "named by extra_train_args dataset_name"
    )
    detail = f"{named}, at the Hub's default branch: training loads it with no revision"
    return Reading(data.name.removeprefix(HF_DATASETS), detail, _hub_page(data))


def _run(records: RunRecords, link: ChainLink) -> Reading:
    layout = records.layout
    return Reading(
        layout.run_id,
        f"deployment {layout.deployment}; its folders are named {layout.slug}",
        # relative to Airflow's UI root, as the page's rows' run_url
        f"dags/{DAG_ID}/runs/{quote(layout.run_id, safe='')}",
    )


def _step(records: RunRecords, link: ChainLink) -> Reading:
    step = exported_step(records)
    uri = _recorded(records, "checkpoint_uri") or f"{records.layout.checkpoints_dir}{step}/"
    if records.export is None:
        return Reading(
            f"step {step}",
            f"{uri}; export kept no result: the step is the champion record's",
            console_url(uri),
            missing=True,
        )
    reason = records.export.get("reason")
    return Reading(f"step {step}", f"{uri}; {reason}" if reason else uri, console_url(uri))


def _evaluation(records: RunRecords, link: ChainLink) -> Reading:
    report = records.heldout
    if link.step == Step.EVALUATE_HELDOUT and report is not None:
        detail = "; ".join(benchmark_lines(report))
        return Reading(verdict_line(report), detail, console_url(records.layout.heldout_dir))
    step = exported_step(records)
    metrics = _recorded(records, "metrics")
    shown = [name for name in EVAL_METRICS if isinstance(metrics, Mapping) and name in metrics]
    lost = (
        "evaluate_heldout kept no report (the run's heldout_tasks asked for one); "
        if records.layout.settings.heldout_tasks
        else ""
    )
    if not shown:
        return Reading(
            f"not recorded: {lost}no evaluation of step {step} was kept",
            "export's result and the champion record hold none",
            missing=True,
        )
    figures = ", ".join(f"{name} {_figure(metrics[name])}" for name in shown)
    said = f"{lost}no held-out evaluation" if lost else "no held-out evaluation (heldout_tasks)"
    return Reading(
        f"the trainer's evaluation of step {step}: {figures}",
        f"{said}: MaxText's own evaluation on its test set",
        missing=bool(lost),
    )


def _figure(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "n/a" if value is None else str(value)
    return f"{value:g}"


def _export(records: RunRecords, link: ChainLink) -> Reading:
    uri = _recorded(records, "export_uri") or records.layout.export_dir
    return Reading(uri, "the trained model in Hugging Face's format", console_url(uri))


def _approval(records: RunRecords, link: ChainLink) -> Reading:
    promoted = records.promoted
    if promoted is None:  # lost to the champion, rejected, promote failed or never ran
        line = promotion_line(
            None, records.approval, records.comparison, records.promote_failed, records.held
        )
        return Reading(line, written=False)
    uri = promoted.get("champion_uri")
    url = console_object_url(uri) if isinstance(uri, str) and uri.startswith("gs://") else None
    when = f"promoted at {promoted.get('promoted_at')}"
    decision = approval_decision(records.approval)
    if decision is None:
        text = "not recorded: approve kept no answer (a run from before it kept one)"
        return Reading(text, when, url, missing=True)
    if isinstance(records.approval, Mapping) and records.approval.get("approval") == NOT_REQUIRED:
        said = (records.comparison or {}).get("reason") or "compare_champion kept no reason"
        return Reading("approval=none: promoted by the rule", f"{said}; {when}", url)
    held = f" (held for a person because {records.held})" if records.held else ""
    ended = f"approve ended at {records.approved_at.isoformat()}; " if records.approved_at else ""
    return Reading(f"{decision}{held}", f"{ended}{when}", url)


def _registered(records: RunRecords, link: ChainLink) -> Reading:
    version = registry_version(records) or ""  # the link is in the chain for a version
    return Reading(version, "uploaded by promote, which gave it the champion alias")


def _unregistered(records: RunRecords) -> Reading:
    if records.promoted is None:
        return Reading("not registered: the export was not promoted")
    if REGISTRY_KEY not in records.promoted:
        return Reading(
            "not recorded: the champion record was written before it kept a registry version",
            missing=True,
        )
    return Reading(
        "not registered", "the deployment names no Vertex AI registry (TPU_RL_VERTEX_REGISTRY)"
    )


# what a person reads of each link of graph.provenance_chain, by its label
READERS: dict[str, Callable[[RunRecords, ChainLink], Reading]] = {
    "base model": _base_model,
    "dataset": _dataset,
    "run": _run,
    "step": _step,
    "evaluation": _evaluation,
    "export": _export,
    "approval": _approval,
    REGISTRY_VERSION: _registered,
}


def champion_status(
    layout: RunLayout,
    uri: str,
    record: ChampionRecord | None,
    promoted: Mapping[str, Any] | None,
    error: str | None = None,
) -> dict[str, Any]:
    """Whether the run's export is its deployment's champion for the model, as the champion
    record at `uri` says (`error`: why it could not be read): {uri, url, run_id (the record's),
    current, text}."""
    whose = f"deployment {layout.deployment}'s champion for {layout.settings.model_name}"
    ours = f"this run's export was promoted at {promoted.get('promoted_at')}" if promoted else None
    current = record is not None and record.run_id == layout.run_id
    if error is not None:
        text = f"The champion record could not be read: {error}"
    elif record is None:
        text = f"The {whose} has no record ({uri} does not exist)"
    elif current:
        text = f"This run's export is the {whose} (promoted at {record.promoted_at})"
    else:
        text = (
            f"The {whose} is run {record.run_id}'s export (promoted at {record.promoted_at}); "
            f"{ours or 'this run is not promoted'}"
        )
    return {
        "uri": uri,
        "url": console_object_url(uri),
        "run_id": record.run_id if record else None,
        "current": current,
        "text": f"{text}.",
    }


def provenance_view(records: RunRecords, champion: Mapping[str, Any]) -> dict[str, Any]:
    """The view's whole answer: the run, the champion's status, the links (none, and `error`
    saying why, when nothing can be named)."""
    try:
        links, error = provenance_links(records), None
    except NoProvenance as why:
        links, error = [], f"No provenance: {why}"
    return {
        "run_id": records.layout.run_id,
        "champion": dict(champion),
        "links": links,
        "error": error,
    }
