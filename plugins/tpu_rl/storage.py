"""GCS look-ups of the run's outputs, through the google provider's GCSHook."""

from __future__ import annotations

import re

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


def newest_checkpoint_step(checkpoints_uri: str, gcp_conn_id: str) -> int | None:
    """The highest <step>/ under .../checkpoints/actor/ that holds model_params."""
    _, prefix = split_gcs_uri(checkpoints_uri)
    steps = set()
    for name in _list(checkpoints_uri, gcp_conn_id):
        rest = name[len(prefix) :]
        match = STEP_DIR.match(rest)
        if match and rest[match.end() :].startswith("model_params/"):
            steps.add(int(match.group(1)))
    return max(steps, default=None)


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
