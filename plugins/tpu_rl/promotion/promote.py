"""A promotion: the verified export becomes the deployment's champion for its model, in the
champion record and, when the deployment has one, in Vertex AI Model Registry.

Both or neither: the export is registered first (a new version, then the champion alias), the
record written last, conditional on the generation compare_champion compared with; a record that
cannot be written moves the alias back. A failure says which state it left (PromotionFailed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from tpu_rl import deployment
from tpu_rl.promotion.champion import ChampionRecord, ChampionRecordError, ChampionStore
from tpu_rl.promotion.exported import ExportedModel
from tpu_rl.training_log.evaluations import LINE_FIELDS

if TYPE_CHECKING:
    from tpu_rl.heldout.report import HeldoutReport
    from tpu_rl.layout import RunLayout
    from tpu_rl.promotion.registry import RegisteredVersion

PREVIOUS_KEPT = 20  # earlier champions' exports named in the record, newest first
STATE_XCOM = "state"  # promote's XCom when it fails: the state it left, for the run's note


class PromotionLog(Protocol):
    """What a promotion says its steps with: a `logging.Logger`, or the operator's `self.log`
    (Airflow's Logger, airflow/sdk/_shared/logging/types.py: `info(self, event, *args, **kw)`)."""

    def info(self, message: str, /, *args: Any) -> Any: ...

    def error(self, message: str, /, *args: Any) -> Any: ...


class PromotionFailed(Exception):
    """A promotion that did not complete: the error (one line), and `state`, what it left."""

    def __init__(self, message: str, state: str) -> None:
        super().__init__(message)
        self.state = state


def champion_record(
    layout: RunLayout, export: ExportedModel, current: ChampionRecord | None
) -> ChampionRecord:
    """This run's export as the champion; the one it replaces heads `previous`."""
    previous = [] if current is None else [current.export_uri, *current.previous]
    return ChampionRecord(
        run_id=layout.run_id,
        export_uri=export.export_uri,
        checkpoint_uri=export.checkpoint_uri,
        step=export.step,
        # what the step scored: not where an Intermediate Eval line came from (its kind and time
        # are text, which a record's metrics may not hold: champion.record_problems)
        metrics={k: v for k, v in export.metrics.items() if k not in LINE_FIELDS},
        promoted_at=datetime.now(UTC).isoformat(timespec="seconds"),
        previous=[uri for uri in previous if uri != export.export_uri][:PREVIOUS_KEPT],
    )


def vertex_model(
    layout: RunLayout, export: ExportedModel, model_id: str, heldout: HeldoutReport | None = None
) -> dict[str, Any]:
    """The Model a promotion uploads (v1 REST Model's fields): the export's files, the serving
    container, the run's id and metrics in the version's description, its slug as a label, and
    the held-out evaluation's step, scores and verdicts as labels when the run had one."""
    from tpu_rl.promotion.registry import version_description, version_labels

    return {
        "display_name": model_id,
        "artifact_uri": export.export_uri,
        "container_spec": {"image_uri": deployment.vertex_serving_image()},
        "version_description": version_description(layout.run_id, export.step, export.metrics),
        "labels": version_labels(layout.slug, layout.deployment, export.step, heldout),
    }


def _named(record: ChampionRecord | None) -> str:
    return "no champion" if record is None else f"{record.export_uri} (run {record.run_id})"


def check_compared(
    store: ChampionStore, current: ChampionRecord | None, comparison: Mapping[str, Any] | None
) -> None:
    """PromotionFailed unless the record is still the one compare_champion compared with: the
    generation it read (`champion_generation`; 0: there was no record) is the one now."""
    compared = (comparison or {}).get("champion_generation")
    if compared is not None and compared == store.generation:
        return
    if compared is None:
        short = "no comparison recorded"
        problem = "compare_champion recorded no champion generation to promote against"
    else:
        short = "the champion changed since the comparison"
        was = (comparison or {}).get("champion") or {}
        problem = (
            f"the champion changed since compare_champion compared with "
            f"{was.get('export_uri', 'no champion')} (generation {compared}): {store.uri} is now "
            f"generation {store.generation}, {_named(current)}"
        )
    raise PromotionFailed(
        f"not promoted: {problem}; nothing changed. Trigger a new run to compare this model "
        "with the current champion",
        f"{short}; the record still names {_named(current)}",
    )


def promote_export(
    layout: RunLayout,
    export: ExportedModel,
    comparison: Mapping[str, Any] | None,
    gcp_conn_id: str,
    log: PromotionLog,
    heldout: HeldoutReport | None = None,
) -> dict[str, Any]:
    """Register the export in Vertex when the deployment says so (`heldout`: the run's held-out
    evaluation, in the version's labels), then write the champion record over the one
    `comparison` compared with (a retry that finds its own record keeps it). The promotion's
    facts, for the XCom; PromotionFailed saying the state left."""
    try:
        model_id = deployment.vertex_registry()
        model = vertex_model(layout, export, model_id, heldout) if model_id else None
    except deployment.DeploymentError as err:
        raise PromotionFailed(str(err), "nothing changed (the deployment's settings)") from None
    store = ChampionStore(layout.model_root, layout.deployment, gcp_conn_id)
    try:
        current = store.read()
    except ChampionRecordError as err:
        raise PromotionFailed(
            str(err), "nothing changed (the champion record is unreadable)"
        ) from None
    if current is not None and (current.run_id, current.export_uri) == (
        layout.run_id,
        export.export_uri,
    ):
        log.info("%s already names this export (an earlier try wrote it).", store.uri)
        return _result(current, store)
    check_compared(store, current, comparison)
    record = champion_record(layout, export, current)
    version = None
    if model_id and model:
        version = register(layout, model_id, model, gcp_conn_id, current)
        record = replace(record, registry_version=version.name)
        log.info("Vertex AI Model Registry: %s carries the champion alias.", version.name)
    try:
        store.write(record)  # 412 if another run promoted since the read
    except Exception as err:
        state = f"the champion record still names {_named(current)}"
        if version is not None and model_id:
            state += "; " + undo_registration(layout, model_id, version, gcp_conn_id, log)
        raise PromotionFailed(
            f"not promoted: the champion record {store.uri} was not written ({err}); {state}",
            state,
        ) from None
    log.info("Champion record %s: %s (was %s)", store.uri, record.export_uri, record.previous)
    return _result(record, store)


def _result(record: ChampionRecord, store: ChampionStore) -> dict[str, Any]:
    return {**record.as_dict(), "champion_uri": store.uri}


def register(
    layout: RunLayout,
    model_id: str,
    model: dict[str, Any],
    gcp_conn_id: str,
    current: ChampionRecord | None,
) -> RegisteredVersion:
    """Upload `model` as a new version of the registry model and give it the champion alias;
    PromotionFailed, saying what was left, when either call fails."""
    from tpu_rl.promotion.registry import (
        RestModelServiceHook,
        move_champion_alias,
        upload_version,
    )

    hook = RestModelServiceHook(gcp_conn_id=gcp_conn_id)
    where = {
        "project": layout.settings.project,
        "region": deployment.vertex_region(layout.settings.region),
        "model_id": model_id,
    }
    unchanged = f"the champion record still names {_named(current)}"
    try:
        version = upload_version(hook, **where, model=model)
    except Exception as err:
        raise PromotionFailed(
            f"not promoted: the Vertex AI upload to model {model_id} failed ({err}); {unchanged}"
            ", no version uploaded",
            f"{unchanged}; Vertex AI unchanged",
        ) from None
    try:
        move_champion_alias(hook, **where, version_id=version.version_id)
    except Exception as err:
        left = f"{unchanged}; Vertex AI version {version.name} uploaded without the champion alias"
        raise PromotionFailed(
            f"not promoted: the champion alias was not moved to {version.name} ({err}); {left}",
            left,
        ) from None
    return version


def undo_registration(
    layout: RunLayout,
    model_id: str,
    version: RegisteredVersion,
    gcp_conn_id: str,
    log: PromotionLog,
) -> str:
    """Move the champion alias back after the record could not be written; what it left."""
    from tpu_rl.promotion.registry import RestModelServiceHook, restore_champion_alias

    back = version.previous_champion
    try:
        restore_champion_alias(
            RestModelServiceHook(gcp_conn_id=gcp_conn_id),
            project=layout.settings.project,
            region=deployment.vertex_region(layout.settings.region),
            model_id=model_id,
            version=version,
        )
    except Exception as err:
        log.error("The champion alias could not be moved back from %s: %s", version.name, err)
        fix = f"version {back}" if back else "no version (remove it)"
        return (
            f"HALF PROMOTED: Vertex AI version {version.name} still carries the champion alias "
            f"(moving it back failed: {err}); move it to {fix} in the Model Registry"
        )
    holder = f"back on version {back}" if back else "removed"
    return f"Vertex AI's champion alias {holder} (version {version.version_id} stays, unaliased)"
