"""What the deployer decides, not whoever triggers a run: connections, run timeout, identity.

Each value comes from the environment (`TPU_RL_<NAME>`) or else from Airflow's configuration
(`[tpu_rl] <name>`, also settable as `AIRFLOW__TPU_RL__<NAME>`); none needs the metadata DB, so
the DAG file reads them at parse time and every task process reads the same values. The one
exception is the deployment's identity when none is configured: it is stored in an Airflow
Variable, read only where tasks run (deployment_id).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import sys

log = logging.getLogger(__name__)

DEFAULT_DAGRUN_TIMEOUT_MINUTES = 72 * 60  # a backstop: the per-task limits end first
MAX_DAGRUN_TIMEOUT_MINUTES = 365 * 24 * 60
DEPLOYMENT_LABEL = "tpu-rl.dev/deployment"
# Where a deployment keeps the identity generated on first use (deployment_id).
DEPLOYMENT_VARIABLE = "tpu_rl_deployment_id"
DAG_LABEL = "tpu-rl.dev/dag"
# Connection types that carry an API token (the HF token is the password), never a database.
HF_CONN_TYPES = {"http", "https", "generic", "huggingface", "hf"}
GCP_CONN_TYPES = {"google_cloud_platform"}
ID_PATTERN = r"[a-z0-9]([-_a-z0-9]{0,61}[a-z0-9])?"
# What a Hugging Face token may hold: visible ASCII, no whitespace or control character (a token
# is `hf_` and letters: https://huggingface.co/docs/hub/security-tokens). It goes into an HTTP
# header, `Authorization: Bearer <token>` (requests refuses a value with CR or LF and the error
# quotes it: requests/_internal_utils.py _VALID_HEADER_VALUE_RE_STR, utils.py
# _validate_header_part), a Kubernetes Secret and the conversion and export Jobs' command line
# (`hf_access_token=${HF_TOKEN}`: tpu_rl.jobs.maxtext_flags).
TOKEN_TEXT = r"[!-~]+"  # a pattern: re compiles and caches it at the first check, not at parse


class DeploymentError(ValueError):
    """A deployment setting is malformed or names an unfit connection."""


def _airflow_conf(section: str, key: str) -> str:
    """A value of Airflow's configuration when Airflow runs this process ('' otherwise: offline
    tools such as `make plan` must not import Airflow)."""
    if "airflow.configuration" not in sys.modules:
        return os.environ.get(f"AIRFLOW__{section.upper()}__{key.upper()}", "").strip()
    from airflow.configuration import conf

    return (conf.get(section, key, fallback="") or "").strip()


def _value(name: str) -> str | None:
    if value := os.environ.get(f"TPU_RL_{name.upper()}", "").strip():
        return value
    return _airflow_conf("tpu_rl", name) or None


def dagrun_timeout_minutes() -> float:
    """The main DAG's dagrun_timeout in minutes (decimals allowed)."""
    raw = _value("dagrun_timeout_minutes")
    if raw is None:
        return float(DEFAULT_DAGRUN_TIMEOUT_MINUTES)
    try:
        minutes = float(raw)
    except ValueError:
        minutes = 0.0
    if not 0 < minutes <= MAX_DAGRUN_TIMEOUT_MINUTES:  # false for nan; inf overflows timedelta
        raise DeploymentError(
            "TPU_RL_DAGRUN_TIMEOUT_MINUTES: must be a positive number of minutes, at most "
            f"{MAX_DAGRUN_TIMEOUT_MINUTES} (a year), got {raw!r}"
        )
    return minutes


def hf_conn_id() -> str:
    """The Airflow connection whose password is the Hugging Face token."""
    return _value("hf_conn_id") or "huggingface_default"


def gcp_conn_id() -> str:
    """The Airflow connection with the Google credentials of every cloud call."""
    return _value("gcp_conn_id") or "google_cloud_default"


def airflow_api_conn_id() -> str:
    """The Airflow connection to this deployment's own REST API (host: the api-server's base
    URL; a user's login and password, or a bearer token as the password) through which
    `outcome` sets the run's note (tpu_rl.report.run_note)."""
    return _value("airflow_api_conn_id") or "tpu_rl_airflow_api"


def configured_deployment_id() -> str | None:
    """The identity the deployer set (TPU_RL_DEPLOYMENT_ID or [tpu_rl] deployment_id), if any."""
    if explicit := _value("deployment_id"):
        return checked_deployment_id(explicit, "TPU_RL_DEPLOYMENT_ID")
    return None


def checked_deployment_id(value: str, source: str) -> str:
    """`value` if it can be a Kubernetes label value (it labels every object of the runs)."""
    if not re.fullmatch(ID_PATTERN, value):
        raise DeploymentError(
            f"{source}: {value!r} must be 1-63 lower-case letters, digits, "
            "'-' or '_', starting and ending with a letter or digit (a label value)"
        )
    return value


def deployment_id() -> str:
    """This Airflow deployment's identity: it names and labels everything the runs create, so
    two deployments sharing a project, cluster and bucket never touch each other's objects.

    The configured one (configured_deployment_id), else the one stored in the Airflow Variable
    `tpu_rl_deployment_id`, generated at random on first use. Stored rather than derived: what
    every process of one deployment can read without a setting (the API base URL, the database
    URL) has the same default in every install (docker-compose.yaml and `make airflow` set
    neither), so a value derived from it would be shared by two teams' installs; a required
    setting would stop `make demo` from running as shipped. The Variable lives in the
    deployment's metadata DB, so only a task reads it (the Task SDK's Variable API), never a
    parse of the DAG file. Two first uses at once both write; both then read back what the DB
    kept, so the runs of one deployment agree on its identity from then on.
    """
    if configured := configured_deployment_id():
        return configured
    from airflow.sdk import Variable

    stored = Variable.get(DEPLOYMENT_VARIABLE, default=None)
    if not stored:
        Variable.set(
            DEPLOYMENT_VARIABLE,
            "af-" + secrets.token_hex(6),
            description="This Airflow deployment's identity on the objects its runs create "
            "(tpu_rl.deployment). Changing it does not affect runs already started.",
        )
        stored = Variable.get(DEPLOYMENT_VARIABLE)
    return checked_deployment_id(str(stored).strip(), f"Variable {DEPLOYMENT_VARIABLE}")


def checked_connection(conn_id: str, allowed_types: set[str], purpose: str) -> object:
    """The connection, after checking its type fits `purpose` (a DB password is no HF token)."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as err:  # AirflowNotFoundException, or the secrets backend's own
        from tpu_rl.token_masking import mask_credentials

        raise DeploymentError(
            f"connection {conn_id!r} cannot be read: {mask_credentials(str(err))}"
        ) from err
    conn_type = (conn.conn_type or "").lower()
    if conn_type not in allowed_types:
        raise DeploymentError(
            f"connection {conn_id!r} has type {conn.conn_type!r}; {purpose} needs one of "
            f"{sorted(allowed_types)} (set by the deployer, not by a run)"
        )
    return conn


def hf_token() -> str:
    """The Hugging Face token (token_of_password), registered with Airflow's secrets masker
    (with and without its prefix, and its wrapped pieces: tpu_rl.token_masking) before it is
    checked. Every reader of the token gets it here: validate, preflight (the DAG's and `make
    preflight`'s), the run's Secret (hf_token_secret), hence the conversion and export Jobs."""
    from tpu_rl.token_masking import register_token

    conn_id = hf_conn_id()
    conn = checked_connection(conn_id, HF_CONN_TYPES, "the Hugging Face token")
    password = getattr(conn, "password", None) or ""
    if password:
        register_token(password)  # a refused token is masked as well
    return token_of_password(conn_id, password)


def token_of_password(conn_id: str, password: str) -> str:
    """The token the connection's password holds. The one rule: the whitespace around it (the
    newline or CRLF that `echo` or a file leaves at its end) is stripped, with a warning, as
    huggingface_hub strips it (utils/_auth.py, _clean_token); what is left must be TOKEN_TEXT,
    else the password is refused. No message quotes the password."""
    token = password.strip()
    if not token:
        raise DeploymentError(
            f"connection {conn_id!r} has no password: put the Hugging Face token there"
        )
    if not re.fullmatch(TOKEN_TEXT, token):
        position = next(i for i, char in enumerate(token) if not re.fullmatch(TOKEN_TEXT, char))
        raise DeploymentError(
            f"connection {conn_id!r}: its password holds whitespace, a control character or a "
            f"non-ASCII character (character {position + 1} of {len(token)}), which no Hugging "
            "Face token has: put the token alone in the password, on one line"
        )
    if token != password:
        log.warning(
            "connection %r: its password has whitespace or a line break around the token "
            "(left by echo or a file?); the token is used without it",
            conn_id,
        )
    return token


def api_endpoint(host: str) -> str:
    """The base URL this deployment reaches `host` (an API or registry host name) at:
    `https://<host>` unless TPU_RL_API_ENDPOINTS ([tpu_rl] api_endpoints), a JSON object
    {host: base URL}, names another (a Private Service Connect endpoint, a registry mirror)."""
    import json

    raw = _value("api_endpoints") or "{}"
    try:
        endpoints = json.loads(raw)
    except ValueError as err:
        raise DeploymentError(f"TPU_RL_API_ENDPOINTS: not a JSON object ({err}): {raw!r}") from err
    if not isinstance(endpoints, dict):
        raise DeploymentError(f"TPU_RL_API_ENDPOINTS: must be a JSON object, got {raw!r}")
    return str(endpoints.get(host) or f"https://{host}").rstrip("/")


def priority_class() -> str | None:
    """The Kubernetes PriorityClass every pod of the runs names (TPU_RL_PRIORITY_CLASS or
    [tpu_rl] priority_class), if the deployer set one: the cluster's policy, not a run's."""
    return _value("priority_class")


def vertex_registry() -> str | None:
    """The Vertex AI Model Registry model (its ID, also its display name) a promotion uploads
    its export to as a new version (TPU_RL_VERTEX_REGISTRY or [tpu_rl] vertex_registry); unset:
    promotions register nowhere but the champion record."""
    model = _value("vertex_registry")
    # a model ID (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/
    # projects.locations.models/upload, modelId: "up to 63 characters, and valid characters are
    # [a-z0-9_-]. The first character cannot be a number or hyphen")
    if model and not re.fullmatch(r"[a-z_][a-z0-9_-]{0,62}", model):
        raise DeploymentError(
            f"TPU_RL_VERTEX_REGISTRY: {model!r} is not a Vertex AI model ID (up to 63 "
            "lower-case letters, digits, '-' or '_'; not starting with a digit or '-')"
        )
    return model


def vertex_region(run_region: str) -> str:
    """Where the registry's model lives (TPU_RL_VERTEX_REGION): the run's region by default."""
    region = _value("vertex_region") or run_region
    if not re.fullmatch(r"[a-z][-a-z0-9]*[a-z0-9]", region):
        raise DeploymentError(
            f"TPU_RL_VERTEX_REGION: {region!r} is not a Google Cloud location name "
            "(e.g. us-central1)"
        )
    return region


# ModelContainerSpec.imageUri: "This URI must identify an image in Artifact Registry or
# Container Registry" (googleapiclient/discovery_cache/documents/aiplatform.v1.json,
# GoogleCloudAiplatformV1ModelContainerSpec): <location>-docker.pkg.dev/... or [<host>.]gcr.io/...
SERVING_IMAGE = r"([a-z0-9-]+-docker\.pkg\.dev|([a-z0-9-]+\.)?gcr\.io)/[a-z0-9][^\s]*"


def vertex_serving_image() -> str:
    """The serving container a registered version names (TPU_RL_VERTEX_SERVING_IMAGE): Vertex
    requires one to upload a model that is not of a prebuilt framework's format."""
    image = _value("vertex_serving_image")
    if not image:
        raise DeploymentError(
            "TPU_RL_VERTEX_SERVING_IMAGE: required with TPU_RL_VERTEX_REGISTRY (the container "
            "that serves the exported Hugging Face model, e.g. a vLLM serving image)"
        )
    if not re.fullmatch(SERVING_IMAGE, image):
        raise DeploymentError(
            f"TPU_RL_VERTEX_SERVING_IMAGE: {image!r} is not an image in Artifact Registry "
            "(<location>-docker.pkg.dev/...) or Container Registry (gcr.io/...), as Vertex AI "
            "requires of a model's serving container"
        )
    return image


def promotion_problems(run_region: str) -> list[str]:
    """Every deployment setting a promotion will need, checked (the registry's model ID, its
    serving image and region, the endpoint it is reached at) so that validate and preflight
    refuse them before any spend: one line per problem, [] when all are fine or unset."""
    try:
        if not vertex_registry():
            return []
    except DeploymentError as err:
        return [str(err)]
    problems = []
    for check in (vertex_serving_image, lambda: api_endpoint(_vertex_host(run_region))):
        try:
            check()
        except DeploymentError as err:
            problems.append(str(err))
    return problems


def _vertex_host(run_region: str) -> str:
    return f"{vertex_region(run_region)}-aiplatform.googleapis.com"


def check_gcp_connection() -> str:
    """The GCP connection id, after checking the connection is a Google Cloud one."""
    conn_id = gcp_conn_id()
    checked_connection(conn_id, GCP_CONN_TYPES, "Google Cloud calls")
    return conn_id
