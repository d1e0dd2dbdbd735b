"""Orbax step saves as they land on Cloud Storage: the objects of one save in Orbax's order,
an actor checkpoint's objects, and the step Tunix restores."""

from __future__ import annotations


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


STEP_METADATA = "_CHECKPOINT_METADATA"
COMMIT_FILE = "commit_success.txt"


def orbax_step_uris(step_dir: str, item: str, files: tuple[str, ...]) -> list[str]:
    """One Orbax step save on gs://, in the order Orbax writes it (orbax-checkpoint 0.12.3:
    CommitFileTemporaryPath, the gs:// default of
    atomicity_defaults.get_default_temporary_path_class):
    the step's `_CHECKPOINT_METADATA` as the folder is made (atomicity._create_tmp_directory),
    the item's arrays, the item's `commit_success.txt` (CompositeCheckpointHandler.finalize ->
    the item's CommitFileTemporaryPath.finalize), `_CHECKPOINT_METADATA` again with the commit
    timestamp, and the step's `commit_success.txt` last (CommitFileTemporaryPath.finalize).
    A save cut at any point writes a prefix of this list."""
    item_dir = join(step_dir, item)
    return [
        join(step_dir, STEP_METADATA),
        *(join(item_dir, f) for f in files),
        join(item_dir, COMMIT_FILE),
        join(step_dir, STEP_METADATA),
        join(step_dir, COMMIT_FILE),
    ]


def checkpoint_uris(base_output_directory: str, run_name: str, step: int) -> list[str]:
    """The objects of one actor checkpoint (`.../checkpoints/actor/<step>/model_params/...`),
    in Orbax's order (orbax_step_uris)."""
    step_dir = join(base_output_directory, run_name, "checkpoints", "actor", str(step))
    return orbax_step_uris(step_dir, "model_params", ("_METADATA", "_sharding", "manifest.ocdbt"))


def newest_complete_step(names: list[str], checkpoints_prefix: str) -> int | None:
    """The step Tunix restores: the highest under `<...>/checkpoints/actor/` that Orbax
    finalized, i.e. with `<step>/commit_success.txt` (step.py: _build_metadata skips steps
    that are not temporary_paths.is_path_finalized)."""
    done = [
        int(rest.split("/")[0])
        for name in names
        if name.startswith(checkpoints_prefix)
        and (rest := name[len(checkpoints_prefix) :]).split("/")[1:] == [COMMIT_FILE]
        and rest.split("/")[0].isdigit()
    ]
    return max(done, default=None)
