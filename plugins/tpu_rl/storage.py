"""GCS look-ups of the run's outputs, and its small JSON records, through the google provider's
GCSHook."""

from __future__ import annotations

import json
from typing import Any

from airflow.providers.google.cloud.hooks.gcs import GCSHook

from tpu_rl.layout import split_gcs_uri

# A step counts only once Orbax finalized it. For gs:// paths Orbax (orbax-checkpoint 0.12.3,
# also its main branch) saves with CommitFileTemporaryPath
# (_src/path/atomicity_defaults.py, get_default_temporary_path_class: `if
# gcs_utils.is_gcs_path(path): return atomicity.CommitFileTemporaryPath`), whose temporary path
# IS the final step folder (atomicity.py, CommitFileTemporaryPath.from_final). So the folder and
# its `_CHECKPOINT_METADATA` exist from the start of a save (atomicity.py,
# _create_tmp_directory: `checkpoint_metadata_store.write(...)` right after the mkdir), and the
# step is finished only when `commit_success.txt` is written, last
# (CommitFileTemporaryPath.finalize). Orbax's own test is the same file
# (temporary_paths.is_path_finalized -> CommitFileTemporaryPath.validate_final: `if not
# exists(final_path / COMMIT_SUCCESS_FILE)`), and so is the step Tunix restores
# (step.py, _build_metadata skips steps that are not is_path_finalized).
COMMIT_FILE = "commit_success.txt"  # atomicity_types.COMMIT_SUCCESS_FILE


def _hook(gcp_conn_id: str) -> GCSHook:
    return GCSHook(gcp_conn_id=gcp_conn_id)


def _list(uri: str, gcp_conn_id: str) -> list[str]:
    bucket, prefix = split_gcs_uri(uri)
    # GCSHook.list, unannotated, returns the objects' names (hooks/gcs.py, `list`)
    names: list[str] = _hook(gcp_conn_id).list(bucket, prefix=prefix)
    return names


def object_exists(uri: str, gcp_conn_id: str) -> bool:
    """Whether the object exists."""
    bucket, name = split_gcs_uri(uri)
    return _hook(gcp_conn_id).exists(bucket, name)


def _committed(hook: GCSHook, step_uri: str) -> bool:
    bucket, name = split_gcs_uri(f"{step_uri.rstrip('/')}/{COMMIT_FILE}")
    return hook.exists(bucket, name)


def _step_folders(hook: GCSHook, checkpoints_uri: str) -> list[int]:
    bucket, prefix = split_gcs_uri(checkpoints_uri)
    folders = hook.list(bucket, prefix=prefix, delimiter="/")
    steps = (name[len(prefix) :].rstrip("/") for name in folders if name.endswith("/"))
    return sorted(int(step) for step in steps if step.isdigit())


def step_committed(step_uri: str, gcp_conn_id: str) -> bool:
    """Whether Orbax finalized the step folder `step_uri` (`.../<step>/`): one GCS request."""
    return object_exists(f"{step_uri.rstrip('/')}/{COMMIT_FILE}", gcp_conn_id)


def checkpoint_steps(checkpoints_uri: str, gcp_conn_id: str) -> list[int]:
    """The numbered step folders under `.../checkpoints/actor/`, ascending, committed or not.

    One listing with delimiter "/": GCS answers the folders (`prefixes`), not their objects
    (a kept 26B checkpoint holds thousands of array objects)."""
    return _step_folders(_hook(gcp_conn_id), checkpoints_uri)


def committed_steps(checkpoints_uri: str, gcp_conn_id: str) -> list[int]:
    """The step folders Orbax finalized, ascending: one listing by folder, then each step's
    commit file, through one client."""
    hook = _hook(gcp_conn_id)
    steps = _step_folders(hook, checkpoints_uri)
    return [s for s in steps if _committed(hook, f"{checkpoints_uri.rstrip('/')}/{s}")]


def newest_committed_step(checkpoints_uri: str, gcp_conn_id: str) -> tuple[int | None, list[int]]:
    """The newest step Orbax finalized (None: none), and the newer steps it did not finalize
    (saves cut off). One listing by folder, then each step's commit file from the newest down,
    through one client (google-cloud-storage fetches a bucket's metadata once per client)."""
    hook = _hook(gcp_conn_id)
    uncommitted: list[int] = []
    for step in reversed(_step_folders(hook, checkpoints_uri)):
        if _committed(hook, f"{checkpoints_uri.rstrip('/')}/{step}"):
            return step, sorted(uncommitted)
        uncommitted.append(step)
    return None, sorted(uncommitted)


def _blob(uri: str, gcp_conn_id: str) -> Any:
    """The object's blob, through the client of the provider's GCSHook."""
    bucket, name = split_gcs_uri(uri)
    return _hook(gcp_conn_id).get_conn().bucket(bucket).blob(name)


def _download(blob: Any) -> bytes | None:
    """The blob's bytes, or None when it does not exist."""
    from google.api_core.exceptions import NotFound

    try:
        data: bytes = blob.download_as_bytes()
    except NotFound:
        return None
    return data


def read_text(uri: str, gcp_conn_id: str) -> str | None:
    """A small text object (the run's report) as text, or None when it does not exist."""
    data = _download(_blob(uri, gcp_conn_id))
    return None if data is None else data.decode(errors="replace")


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
        return _blob(self.uri, self.gcp_conn_id)

    def read(self) -> Any:
        """The object's value, or None when it does not exist."""
        blob = self._blob()
        data = _download(blob)
        self.generation = 0 if data is None else blob.generation
        return None if data is None else json.loads(data)

    def write(self, value: Any) -> None:
        """Replace the object's value, if nobody wrote it since this one read it."""
        blob = self._blob()
        blob.upload_from_string(
            json.dumps(value), content_type="application/json", if_generation_match=self.generation
        )
        self.generation = blob.generation
