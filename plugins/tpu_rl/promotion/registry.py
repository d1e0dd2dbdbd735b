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
    """The model version a promotion made, as Vertex names it."""

    model: str  # projects/<p>/locations/<r>/models/<id>
    version_id: str

    @property
    def name(self) -> str:
        return f"{self.model}@{self.version_id}"


def version_labels(run_slug: str, deployment: str, step: int | None) -> dict[str, str]:
    """Label values Vertex accepts (lower-case letters, digits, '-', '_'; 63 at most): the
    run's slug (its folders' and objects' name), the deployment, the exported step."""
    labels = {f"{LABEL_PREFIX}run": run_slug, f"{LABEL_PREFIX}deployment": deployment}
    if step is not None:
        labels[f"{LABEL_PREFIX}step"] = str(step)
    return labels


def version_description(run_id: str, step: int | None, metrics: Mapping[str, Any]) -> str:
    """`run <run id>, step <n>: accuracy=0.41, mean_reward=1.234`: what a label cannot hold."""
    shown = ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items()
    )
    return f"run {run_id}, step {step if step is not None else 'n/a'}: {shown}"[:DESCRIPTION_LIMIT]


def register_version(
    hook: ModelServiceHook,
    *,
    project: str,
    region: str,
    model_id: str,
    model: Mapping[str, Any],
) -> RegisteredVersion:
    """Upload `model` as a new version of `model_id` and move the champion alias to it.

    The first promotion makes the model: Vertex answers NOT_FOUND for a parent model that does
    not exist, and the upload is repeated with `model_id` (UploadModelRequest.model_id: "The ID
    to use for the uploaded Model"). The alias moves in one call: "If you apply an existing alias
    that is used by another model version, the alias is removed from that version"
    (https://cloud.google.com/vertex-ai/docs/model-registry/model-alias), so the previous
    champion stays, a version without the alias.
    """
    from google.api_core.exceptions import NotFound

    client = hook.get_model_service_client(region)
    parent = client.common_location_path(project, region)
    request = {"parent": parent, "model": dict(model)}
    try:
        operation = client.upload_model(
            request={**request, "parent_model": client.model_path(project, region, model_id)}
        )
        response = operation.result()
    except NotFound:
        response = client.upload_model(request={**request, "model_id": model_id}).result()
    version = RegisteredVersion(response.model, response.model_version_id)
    hook.add_version_aliases(
        region=region,
        model_id=f"{model_id}@{version.version_id}",
        project_id=project,
        version_aliases=[CHAMPION_ALIAS],
    )
    return version
