"""Orbax step saves as they land on Cloud Storage: the objects of one save in Orbax's order,
an actor checkpoint's objects, the complete steps (Tunix restores the newest) and the steps
the rotation deletes."""

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


def complete_steps(names: list[str], checkpoints_prefix: str) -> list[int]:
    """The steps under `<...>/checkpoints/actor/` that Orbax finalized, i.e. with
    `<step>/commit_success.txt` (step.py: _build_metadata skips steps that are not
    temporary_paths.is_path_finalized), in order."""
    return sorted(
        int(rest.split("/")[0])
        for name in names
        if name.startswith(checkpoints_prefix)
        and (rest := name[len(checkpoints_prefix) :]).split("/")[1:] == [COMMIT_FILE]
        and rest.split("/")[0].isdigit()
    )


def steps_to_remove(known: list[int], max_to_keep: int | None) -> list[int]:
    """The steps Orbax deletes once the newest of `known` commits, under MaxText's
    `max_num_checkpoints_to_keep` (train_rl.py:443-446 -> Tunix checkpoint_options.py:180
    `LatestN(max_to_keep)`; google/orbax 20be488a preservation_policy.py:84-101 keeps the latest
    n of every known step, the new uncommitted one included, checkpoint_manager.py:1532,
    1989-2005; the deletion runs in `_finalize` after the new step's commit, 2152-2167).
    `known`: the steps listed at start (finalized ones) and those this process saved since."""
    ordered = sorted(set(known))
    if max_to_keep is None or len(ordered) <= max_to_keep:
        return []
    return ordered[: len(ordered) - max_to_keep]
