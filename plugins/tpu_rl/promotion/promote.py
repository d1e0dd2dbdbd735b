"""A promotion: the verified export becomes the deployment's champion for its model, in the
champion record and, when the deployment has one, in Vertex AI Model Registry."""

from __future__ import annotations

from datetime import UTC, datetime
from logging import Logger
from typing import TYPE_CHECKING, Any

from tpu_rl import deployment
from tpu_rl.promotion.champion import ChampionRecord, ChampionStore
from tpu_rl.promotion.exported import ExportedModel

if TYPE_CHECKING:
    from tpu_rl.layout import RunLayout
    from tpu_rl.settings.run_settings import RunSettings

PREVIOUS_KEPT = 20  # earlier champions' exports named in the record, newest first


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
        metrics=dict(export.metrics),
        promoted_at=datetime.now(UTC).isoformat(timespec="seconds"),
        previous=[uri for uri in previous if uri != export.export_uri][:PREVIOUS_KEPT],
    )


def vertex_model(layout: RunLayout, export: ExportedModel, model_id: str) -> dict[str, Any]:
    """The Model a promotion uploads (v1 REST Model's fields): the export's files, the serving
    container, the run's id and metrics in the version's description, its slug as a label."""
    from tpu_rl.promotion.registry import version_description, version_labels

    return {
        "display_name": model_id,
        "artifact_uri": export.export_uri,
        "container_spec": {"image_uri": deployment.vertex_serving_image()},
        "version_description": version_description(layout.run_id, export.step, export.metrics),
        "labels": version_labels(layout.slug, layout.deployment, export.step),
    }


def promote_export(
    layout: RunLayout, export: ExportedModel, gcp_conn_id: str, log: Logger
) -> dict[str, Any]:
    """Write the champion record (a retry that finds its own record keeps it), then register
    the export in Vertex when the deployment says so. The promotion's facts, for the XCom."""
    model_id = deployment.vertex_registry()  # the registry's settings checked before any write
    model = vertex_model(layout, export, model_id) if model_id else None
    store = ChampionStore(layout.model_root, layout.deployment, gcp_conn_id)
    current = store.read()
    if current is not None and (current.run_id, current.export_uri) == (
        layout.run_id,
        export.export_uri,
    ):
        record = current
        log.info("%s already names this export (an earlier try wrote it).", store.uri)
    else:
        record = champion_record(layout, export, current)
        store.write(record)  # 412 if another run promoted since the read
        log.info("Champion record %s: %s (was %s)", store.uri, record.export_uri, record.previous)
    result: dict[str, Any] = {
        **record.as_dict(),
        "champion_uri": store.uri,
        "registry_version": None,
    }
    if model_id and model:
        result["registry_version"] = register(layout.settings, model_id, model, gcp_conn_id)
        log.info(
            "Vertex AI Model Registry: %s carries the champion alias.", result["registry_version"]
        )
    return result


def register(settings: RunSettings, model_id: str, model: dict[str, Any], gcp_conn_id: str) -> str:
    """Upload `model` as a new version of the deployment's registry model; its name."""
    from tpu_rl.promotion.registry import RestModelServiceHook, register_version

    version = register_version(
        RestModelServiceHook(gcp_conn_id=gcp_conn_id),
        project=settings.project,
        region=deployment.vertex_region(settings.region),
        model_id=model_id,
        model=model,
    )
    return version.name
