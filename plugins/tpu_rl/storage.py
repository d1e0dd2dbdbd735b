"""GCS look-ups of the run's outputs, and its small JSON records, through the google provider's
GCSHook."""

from __future__ import annotations

import json
import re
from typing import Any

from airflow.providers.google.cloud.hooks.gcs import GCSHook

from tpu_rl.layout import split_gcs_uri

STEP_DIR = re.compile(r"^(\d+)/")


def _list(uri: str, gcp_conn_id: str) -> list[str]:
    bucket, prefix = split_gcs_uri(uri)
    return GCSHook(gcp_conn_id=gcp_conn_id).list(bucket, prefix=prefix)


def object_exists(uri: str, gcp_conn_id: str) -> bool:
    """Whether the object exists."""
    bucket, name = split_gcs_uri(uri)
    return GCSHook(gcp_conn_id=gcp_conn_id).exists(bucket, name)


# What Orbax writes into a step's folder once the save finished (it writes the arrays first):
# the step metadata, and on older releases commit_success.txt.
COMMIT_MARKERS = ("_CHECKPOINT_METADATA", "commit_success.txt")


def checkpoint_steps(checkpoints_uri: str, gcp_conn_id: str) -> tuple[list[int], list[int]]:
    """The <step>/ folders under .../checkpoints/actor/ holding model_params, in ascending
    order: those whose save finished (a commit marker), and those without one."""
    _, prefix = split_gcs_uri(checkpoints_uri)
    with_params, committed = set(), set()
    for name in _list(checkpoints_uri, gcp_conn_id):
        rest = name[len(prefix) :]
        match = STEP_DIR.match(rest)
        if not match:
            continue
        inside = rest[match.end() :]
        if inside.startswith("model_params/"):
            with_params.add(int(match.group(1)))
        elif inside in COMMIT_MARKERS:
            committed.add(int(match.group(1)))
    return sorted(with_params & committed), sorted(with_params - committed)


def missing_export_files(export_uri: str, gcp_conn_id: str) -> list[str]:
    """What a Hugging Face export lacks: config.json, safetensors shards, tokenizer files."""
    _, prefix = split_gcs_uri(export_uri)
    names = [n[len(prefix) :] for n in _list(export_uri, gcp_conn_id)]
    missing = []
    if "config.json" not in names:
        missing.append("config.json")
    if not any(n.endswith(".safetensors") for n in names):
        missing.append("*.safetensors")
    if not any(n.startswith("tokenizer") for n in names):
        missing.append("tokenizer*")
    return missing


class JsonObject:
    """One small JSON object in GCS (e.g. the run's training attempts), read and written through
    the client of the provider's GCSHook.

    A write is conditional on the generation last read (0 when there was none: the object must
    not exist yet), so a stale writer fails with 412 Precondition Failed instead of overwriting a
    newer record: Cloud Storage's ifGenerationMatch precondition,
    https://cloud.google.com/storage/docs/request-preconditions#special-case (generation 0).
    """

    def __init__(self, uri: str, gcp_conn_id: str) -> None:
        self.uri, self.gcp_conn_id = uri, gcp_conn_id
        self.generation: int | None = 0

    def _blob(self) -> Any:
        bucket, name = split_gcs_uri(self.uri)
        return GCSHook(gcp_conn_id=self.gcp_conn_id).get_conn().bucket(bucket).blob(name)

    def read(self) -> Any:
        """The object's value, or None when it does not exist."""
        from google.api_core.exceptions import NotFound

        blob = self._blob()
        try:
            data = blob.download_as_bytes()
        except NotFound:
            self.generation = 0
            return None
        self.generation = blob.generation
        return json.loads(data)

    def write(self, value: Any) -> None:
        """Replace the object's value, if nobody wrote it since this one read it."""
        blob = self._blob()
        blob.upload_from_string(
            json.dumps(value), content_type="application/json", if_generation_match=self.generation
        )
        self.generation = blob.generation
