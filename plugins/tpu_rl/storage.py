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
