"""Registering a promoted export in Vertex AI Model Registry: a new version of the deployment's
model (tpu_rl.deployment.vertex_registry), which then carries the `champion` alias.

Through the google provider's ModelServiceHook, with one change: its client talks REST, not
gRPC, at the endpoint TPU_RL_API_ENDPOINTS names for `<region>-aiplatform.googleapis.com` (by
default that host over HTTPS, where the hook's own client would go: ModelServiceHook.
_get_api_endpoint), as the project's other Google API calls do (tpu_rl.deployment.api_endpoint):
a Private Service Connect endpoint, or a test's loopback fake, is one setting away. The hook
takes neither a transport nor an endpoint from its connection (get_model_service_client builds
the client with the default transport, gRPC, and only the regional endpoint).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow.providers.google.cloud.hooks.vertex_ai.model_service import ModelServiceHook

from tpu_rl.heldout.report import HeldoutReport
from tpu_rl.heldout.table import LABELS_PER_RESOURCE, heldout_labels

CHAMPION_ALIAS = "champion"
LABEL_PREFIX = "tpu-rl-"
DESCRIPTION_LIMIT = 1000  # kept short: the console shows it in the versions' table


class RestModelServiceHook(ModelServiceHook):
    """The provider's hook, its client on REST at the deployment's endpoint for the region."""

    def get_model_service_client(self, region: str | None = None) -> Any:
        from google.api_core.client_options import ClientOptions
        from google.cloud.aiplatform_v1 import ModelServiceClient

        from tpu_rl import deployment

        endpoint = deployment.api_endpoint(f"{region}-aiplatform.googleapis.com")
        # The REST transport keeps an endpoint's http:// or https:// scheme
        # (transports/rest_base.py, _BaseModelServiceRestTransport.__init__: `host =
        # f"{url_scheme}://{host}" if not url_match_items["scheme"] else host`).
        return ModelServiceClient(
            credentials=self.get_credentials(),
            transport="rest",
            client_options=ClientOptions(api_endpoint=endpoint),
        )


@dataclass(frozen=True)
class RegisteredVersion:
    """The model version a promotion made, as Vertex names it, and the version that held the
    champion alias before (None: none did), to move it back to."""

    model: str  # projects/<p>/locations/<r>/models/<id>
    version_id: str
    previous_champion: str | None = None

    @property
    def name(self) -> str:
        return f"{self.model}@{self.version_id}"


def version_labels(
    run_slug: str, deployment: str, step: int | None, heldout: HeldoutReport | None = None
) -> dict[str, str]:
    """Label values Vertex accepts (lower-case letters, digits, '-', '_'; 63 at most): the
    run's slug (its folders' and objects' name), the deployment, the exported step; with
    held-out evaluation its step, and each scored benchmark's accuracy and verdicts in the
    labels the others leave of Vertex's 64 (tpu_rl.heldout.table.heldout_labels)."""
    labels = {f"{LABEL_PREFIX}run": run_slug, f"{LABEL_PREFIX}deployment": deployment}
    if step is not None:
        labels[f"{LABEL_PREFIX}step"] = str(step)
    if heldout is not None:
        labels |= heldout_labels(heldout, LABEL_PREFIX, LABELS_PER_RESOURCE - len(labels))
    return labels


def version_description(run_id: str, step: int | None, metrics: Mapping[str, Any]) -> str:
    """`run <run id>, step <n>: accuracy=0.41, mean_reward=1.234`: what a label cannot hold."""
    shown = ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items()
    )
    return f"run {run_id}, step {step if step is not None else 'n/a'}: {shown}"[:DESCRIPTION_LIMIT]


def _get_model(client: Any, name: str) -> Any | None:
    """models.get of `name` (a model, or `<model>@<version id or alias>`); None on NOT_FOUND."""
    from google.api_core.exceptions import NotFound

    try:
        return client.get_model(request={"name": name})
    except NotFound:
        return None


def upload_version(
    hook: ModelServiceHook,
    *,
    project: str,
    region: str,
    model_id: str,
    model: Mapping[str, Any],
) -> RegisteredVersion:
    """Upload `model` as a new version of `model_id`, the champion alias left where it is.

    The model is read first (models.get): UploadModelRequest's `parentModel` is "The resource
    name of the model into which to upload the version. Only specify this field when uploading
    a new version", and `modelId` "The ID to use for the uploaded Model" (googleapiclient's
    discovery_cache/documents/aiplatform.v1.json, GoogleCloudAiplatformV1UploadModelRequest):
    the first promotion makes the model with its id, the next ones add versions to it. The
    version holding the champion alias is read too (models.get of `<model>@champion`: "In
    order to retrieve a specific version of the model, also provide the version ID or version
    alias", the same document, models.get's `name`), to move the alias back to it.
    """
    client = hook.get_model_service_client(region)
    name = client.model_path(project, region, model_id)
    request: dict[str, Any] = {
        "parent": client.common_location_path(project, region),
        "model": dict(model),
    }
    previous = None
    if _get_model(client, name) is None:
        request["model_id"] = model_id
    else:
        request["parent_model"] = name
        holder = _get_model(client, f"{name}@{CHAMPION_ALIAS}")
        previous = holder.version_id if holder is not None else None
    # google-api-core 2.44.0's PollingFuture.result (future/polling.py:143) is unannotated
    response = client.upload_model(request=request).result()  # type: ignore[no-untyped-call]
    return RegisteredVersion(response.model, response.model_version_id, previous)


def move_champion_alias(
    hook: ModelServiceHook, *, project: str, region: str, model_id: str, version_id: str
) -> None:
    """Put the champion alias on `version_id`. The alias moves in one call: "If you apply an
    existing alias that is used by another model version, the alias is removed from that
    version" (https://cloud.google.com/vertex-ai/docs/model-registry/model-alias), so the
    previous champion stays, a version without the alias."""
    hook.add_version_aliases(
        region=region,
        model_id=f"{model_id}@{version_id}",
        project_id=project,
        version_aliases=[CHAMPION_ALIAS],
    )


def restore_champion_alias(
    hook: ModelServiceHook, *, project: str, region: str, model_id: str, version: RegisteredVersion
) -> None:
    """Undo move_champion_alias: the alias back on the version that held it, or off `version`
    when none did (MergeVersionAliasesRequest.versionAliases: "Add the `-` prefix to an alias
    means removing that alias from the version", aiplatform.v1.json)."""
    if version.previous_champion:
        move_champion_alias(
            hook,
            project=project,
            region=region,
            model_id=model_id,
            version_id=version.previous_champion,
        )
    else:
        hook.delete_version_aliases(
            region=region,
            model_id=f"{model_id}@{version.version_id}",
            project_id=project,
            version_aliases=[CHAMPION_ALIAS],
        )
