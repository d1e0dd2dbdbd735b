"""Moving a run's poisoned checkpoint saves out of the way before training resumes from the
newest healthy one (health_action=resume, tpu_rl.watch.health).

A resumed MaxText run restores the NEWEST step its checkpoint manager finds: Tunix's
`CheckpointManager.maybe_restore` takes `step = self.latest_step()`, the Orbax checkpointer's
`latest` step, when no step is given ("If None, the latest step will be used",
google/tunix tunix/sft/checkpoint_manager.py, maybe_restore and latest_step), and MaxText's
train_rl gives none. Orbax counts only finalized steps, those with `<step>/commit_success.txt`
(tpu_rl.storage). So every step folder at or after the anomaly step is copied to the run's
`quarantine/<step>/` folder and then deleted from the checkpoint folder, its commit file first
(a move cut half way leaves no step Orbax would restore).

The quarantine is a sibling of the run's `checkpoints/` folder (`<base>/<run_name>/quarantine/`),
not a folder inside `checkpoints/actor/`: there Orbax's step listing and rotation
(`LatestN` counts every step it lists at start, tunix/sft/checkpoint_options.py:180) and this
package's step look-ups (tpu_rl.storage.checkpoint_steps) would see it; beside it, the saves stay
in the run's own folder for a post-mortem and go with the run's folder.

GCS has no move: an object is copied with objects.rewrite, which may take several calls for a
large object or across locations and storage classes (each answers a rewriteToken until `done`,
https://cloud.google.com/storage/docs/json_api/v1/objects/rewrite), then deleted
(objects.delete). Running the move again finishes a cut one: what is left is copied again.
"""

from __future__ import annotations

from typing import Any

from tpu_rl.layout import split_gcs_uri
from tpu_rl.storage import COMMIT_FILE


def quarantine_dir(checkpoints_uri: str) -> str:
    """The run's quarantine folder: `<base>/<run_name>/quarantine/` beside `checkpoints/`, from
    `<base>/<run_name>/checkpoints/actor/`."""
    run_dir = checkpoints_uri.rstrip("/").removesuffix("/actor").removesuffix("/checkpoints")
    return f"{run_dir}/quarantine/"


def _client(gcp_conn_id: str) -> Any:
    from airflow.providers.google.cloud.hooks.gcs import GCSHook

    return GCSHook(gcp_conn_id=gcp_conn_id).get_conn()


def _step_objects(client: Any, bucket: str, step_prefix: str) -> list[Any]:
    """The step's objects, its commit file first."""
    blobs = list(client.list_blobs(bucket, prefix=step_prefix))
    return sorted(blobs, key=lambda blob: not blob.name.endswith(f"/{COMMIT_FILE}"))


def _copy(client: Any, blob: Any, bucket: str, name: str) -> None:
    """objects.rewrite until GCS says done (no rewriteToken left)."""
    target = client.bucket(bucket).blob(name)
    token, _, _ = target.rewrite(blob)
    while token is not None:
        token, _, _ = target.rewrite(blob, token=token)


def quarantine_steps(checkpoints_uri: str, gcp_conn_id: str, steps: list[int]) -> str:
    """Move the step folders `steps` of `checkpoints_uri` to the run's quarantine folder (each
    object copied, then the step's objects deleted, its commit file first); returns the
    quarantine folder."""
    bucket, prefix = split_gcs_uri(checkpoints_uri.rstrip("/") + "/")
    target_uri = quarantine_dir(checkpoints_uri)
    target_bucket, target_prefix = split_gcs_uri(target_uri)
    client = _client(gcp_conn_id)
    for step in steps:
        blobs = _step_objects(client, bucket, f"{prefix}{step}/")
        for blob in blobs:
            _copy(client, blob, target_bucket, target_prefix + blob.name[len(prefix) :])
        for blob in blobs:
            blob.delete()
    return target_uri


def steps_from(checkpoints_uri: str, gcp_conn_id: str, anomaly_step: int) -> list[int]:
    """The step folders (committed or cut) at or after `anomaly_step`: the poisoned saves."""
    from tpu_rl import storage

    steps = storage.checkpoint_steps(checkpoints_uri, gcp_conn_id)
    return [step for step in steps if step >= anomaly_step]
