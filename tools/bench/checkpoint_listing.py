"""export_step_gcs_requests_per_kept_step and export_step_objects_listed: what picking the
export (or resume) step costs on Cloud Storage for a run with 10 kept checkpoints of 2,000
objects each.

The product (tpu_rl.storage.newest_committed_step) lists `checkpoints/actor/` by folder
(delimiter "/") and checks each step's `commit_success.txt` from the newest down. The baseline is
the step choice by a full listing, reproduced here: one listing of every object under
`checkpoints/actor/` (GCSHook.list without a delimiter), every step with `model_params/` and a
marker counted. Requests and listed entries are counted by the sandbox's GCS emulator, which
pages listings as Cloud Storage does (at most 1,000 entries a page: sandbox/gcs_rules.py).
Three cases: every step committed, the newest save cut, and only the oldest committed (the
worst case for the product); the value is the worst.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from airflow.providers.google.cloud.hooks.gcs import GCSHook

from sandbox.harness import SETTINGS, Sandbox
from sandbox.orbax_saves import checkpoint_uris
from tools.bench.metric import metric
from tpu_rl import storage

KEPT_STEPS = 10
OBJECTS_PER_STEP = 2000
STEP_EVERY = 50
GOAL_REQUESTS_PER_STEP = 2.0
BASE = f"gs://{SETTINGS['gcs_bucket']}/gemma4-26b/trained/"
RUN = "rl-bench"
ACTOR = f"{BASE}{RUN}/checkpoints/actor/"
CASES = {
    "all_committed": KEPT_STEPS,
    "newest_cut": KEPT_STEPS - 1,
    "only_oldest_committed": 1,
}


def step_objects(step: int, committed: bool) -> list[str]:
    """OBJECTS_PER_STEP objects in Orbax's order on gs:// (cut before the commit file)."""
    uris = checkpoint_uris(BASE, RUN, step)
    head, arrays, tail = uris[:1], uris[1:-3], uris[-3:]
    arrays_dir = uris[1].rsplit("/", 1)[0]
    fill = [f"{arrays_dir}/d/{i:05x}" for i in range(OBJECTS_PER_STEP - len(set(uris)))]
    objects = [*head, *arrays, *fill, *tail]
    return objects if committed else objects[:-1]


def seed(box: Sandbox, committed_steps: int) -> None:
    """The kept checkpoints, straight into the emulator's store (20,000 uploads over HTTP
    would take minutes): the oldest `committed_steps` committed, the newer ones cut."""
    bucket = SETTINGS["gcs_bucket"]
    emulated = box.gcs.storage
    box.gcs.write(f"gs://{bucket}/seed")
    template = emulated.get_file_obj(bucket, "seed")
    emulated.objects[bucket] = {}
    for index in range(KEPT_STEPS):
        step = (index + 1) * STEP_EVERY
        for uri in step_objects(step, committed=index < committed_steps):
            name = uri.removeprefix(f"gs://{bucket}/")
            obj = copy.copy(template)
            obj.update(name=name, id=f"{bucket}/{name}")
            emulated.objects[bucket][name] = obj
            emulated._store.write_bytes(emulated._object_path(bucket, name), b"\0")


def full_listing_step(conn: str) -> int | None:
    """The step choice by a full listing: every object listed, `_CHECKPOINT_METADATA` or
    `commit_success.txt` beside `model_params/` counted as committed."""
    bucket, prefix = ACTOR.removeprefix("gs://").split("/", 1)
    with_params, marked = set(), set()
    for name in GCSHook(gcp_conn_id=conn).list(bucket, prefix=prefix):
        match = re.match(r"^(\d+)/(.*)$", name[len(prefix) :])
        if not match:
            continue
        step, inside = int(match.group(1)), match.group(2)
        if inside.startswith("model_params/"):
            with_params.add(step)
        elif inside in ("_CHECKPOINT_METADATA", "commit_success.txt"):
            marked.add(step)
    return max(with_params & marked, default=None)


def count(box: Sandbox, pick: Any) -> tuple[Any, int, int]:
    """(the step picked, GCS requests, entries listed) for one way of picking."""
    box.gcs.traffic.reset()
    picked = pick()
    return picked, len(box.gcs.traffic.requests), box.gcs.traffic.listed


def measure(box: Sandbox) -> dict[str, dict[str, Any]]:
    conn = "google_cloud_default"
    cases: dict[str, dict[str, Any]] = {}
    for case, committed in CASES.items():
        seed(box, committed)
        new = count(box, lambda: storage.newest_committed_step(ACTOR, conn)[0])
        old = count(box, lambda: full_listing_step(conn))
        cases[case] = {
            "expected_step": committed * STEP_EVERY,
            "product": dict(zip(("step", "requests", "listed"), new, strict=True)),
            "full_listing": dict(zip(("step", "requests", "listed"), old, strict=True)),
        }
    worst = max(cases.values(), key=lambda c: c["product"]["requests"])
    details = {"kept_steps": KEPT_STEPS, "objects_per_step": OBJECTS_PER_STEP, "cases": cases}
    return {
        "export_step_gcs_requests_per_kept_step": metric(
            worst["product"]["requests"] / KEPT_STEPS,
            worst["full_listing"]["requests"] / KEPT_STEPS,
            unit="requests",
            goal=GOAL_REQUESTS_PER_STEP,
            baseline_is=(
                "one listing of every object under checkpoints/actor/ (the step choice by a "
                "full listing)"
            ),
            details=details,
        ),
        "export_step_objects_listed": metric(
            worst["product"]["listed"],
            worst["full_listing"]["listed"],
            unit="entries",
            goal=KEPT_STEPS,
            baseline_is=(
                "one listing of every object under checkpoints/actor/ (the step choice by a "
                "full listing)"
            ),
            details=details,
        ),
    }


if __name__ == "__main__":  # just this figure: python -m tools.bench.checkpoint_listing OUT
    import json
    import sys
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp, Sandbox(Path(tmp)).up() as box:
        Path(sys.argv[1]).write_text(json.dumps(measure(box), indent=1) + "\n")
