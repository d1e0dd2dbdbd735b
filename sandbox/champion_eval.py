"""The deployment's champion in the sandbox: a record and checkpoint of an earlier run in the
fake bucket, and the champion's evaluation Job as MaxText's train_rl runs it (its flags read
from the pod's command): it scores the checkpoint it loads, trains for
`int(num_batches * train_fraction)` steps (MaxText's train_steps with one iteration and epoch),
and fails like a Pathways client whose backend is gone."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sandbox.orbax_saves import checkpoint_uris, join
from sandbox.pod_scripts import ContainerExit, PodInfo, PodScript, call
from sandbox.workloads import GRPC_UNAVAILABLE, EvalResult, Storage, grpo_client_script

CHAMPION_RUN = "rl-champion0"  # the earlier run whose export is the champion
CHAMPION_STEP = 50


def seed_champion(gcs: Any, bucket: str, deployment: str, metrics: EvalResult) -> dict[str, Any]:
    """An earlier run's promoted export: its committed checkpoint and the champion record
    (tpu_rl.promotion.champion's shape, at its place). Returns the record."""
    root = f"gs://{bucket}/gemma4-26b"
    for uri in checkpoint_uris(f"{root}/trained/", CHAMPION_RUN, CHAMPION_STEP):
        gcs.write(uri, b"\0")
    record = {
        "run_id": "scheduled__2026-11-26T00:00:00+00:00",
        "export_uri": f"{root}/hf-trained/{CHAMPION_RUN}/",
        "checkpoint_uri": join(
            root,
            "trained",
            CHAMPION_RUN,
            "checkpoints",
            "actor",
            str(CHAMPION_STEP),
            "model_params/",
        ),
        "step": CHAMPION_STEP,
        "metrics": {"mean_reward": metrics.mean_reward},
        "promoted_at": "2026-11-26T08:00:00+00:00",
        "previous": [],
    }
    gcs.write(f"{root}/champions/{deployment}.json", json.dumps(record).encode())
    return record


def champion_evaluation_script(
    info: PodInfo,
    flag: Callable[[PodInfo, str], str | None],
    scores: EvalResult,
    storage: Storage,
    backend_exists: Callable[[PodInfo], bool],
) -> PodScript:
    """train_rl on the pod's flags, scoring `scores` for the checkpoint it loads; without the
    run's backend (`backend_exists`), it dies with gRPC UNAVAILABLE at once."""
    steps = int(int(flag(info, "num_batches") or 50) * float(flag(info, "train_fraction") or 1))
    script = grpo_client_script(
        base_output_directory=flag(info, "base_output_directory") or "",
        run_name=flag(info, "run_name") or "",
        num_batches=steps,
        pre=scores,
        post=scores,
        write_object=storage,
        load_parameters_path=flag(info, "load_parameters_path"),
    )

    def connect(pod: PodInfo) -> None:
        if not backend_exists(pod):
            raise ContainerExit(1, GRPC_UNAVAILABLE)

    return PodScript([call(connect), *script.steps], script.container)
