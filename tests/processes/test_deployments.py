"""Two Airflow deployments on one sandbox cluster and bucket, on real processes (the only
version: tests/e2e/test_deployments.py has the in-process runs of one deployment's setting changed
mid-run and of a cluster another deployment keeps).

Both are installed as shipped (no TPU_RL_DEPLOYMENT_ID): the session's deployment is staging;
production is a second install beside it, with its own metadata database (on the same
PostgreSQL server) and its own Hugging Face token. It runs all four processes: the API server
serves its tasks' execution API and the trigger, the scheduler runs the tasks (LocalExecutor),
the DAG processor puts the DAG in its database and the triggerer runs the reward wait, the one
that would follow the other's training Job. Both trigger the same run id on one existing
cluster; with staging's run at its reward wait, production's reaches its own, finishes, and its
janitor sweeps with deletion on and no grace period; then staging's finishes.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator

import pytest

from sandbox.cloud import add_running_cluster
from sandbox.harness import EXISTING_CLUSTER_VARS, HF_TOKEN, SETTINGS
from sandbox.processes.api import FINISHED
from sandbox.processes.deployment import Deployment, another_deployment, harness_folder
from sandbox.processes.runs import (
    DEPLOYER_ENV,
    finish,
    settings_for,
    start_run,
    wait_for_event,
)
from tpu_rl.jobs.manifests import TOKEN_KEY
from tpu_rl.settings.fields import TUTORIAL_MODEL

# In the first process group, before its scenarios (make test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("processes")

NAME = "two_deployments"  # one run id in both: proc__two_deployments
PRODUCTION_TOKEN = "hf_ProductionSecretToken0123456789ab"
PRODUCTION_HF_USER = "production-user"
# One cluster, kept by both. Both runs are held at their reward wait until the test releases
# them, so staging's hold must outlast production's whole run and its janitor on a loaded
# machine (holds of 150 and 200 s ran out first: staging had moved on when its objects were
# checked). A training Job lives its step's limit plus the pending wait
# (manifests.tpu_job_deadline_seconds): runs.LOADED_LIMITS' 20000 simulated minutes, 1,204 s.
SHARED = {"cluster_mode": "existing", "reservation": ""}
HOLD_S = 900  # wall seconds; the test releases both holds long before, once both are held


def cluster_objects(d: Deployment) -> dict[str, tuple[str, str | None]]:
    """Every Job, JobSet and Secret on the cluster: its uid and (a Secret's) token, by name."""
    objects = {}
    for kind in ("jobs", "jobsets", "secrets"):
        for obj in d.sandbox.emu.list(kind):
            token = (obj.get("data") or {}).get(TOKEN_KEY)
            meta = obj["metadata"]
            objects[f"{kind}/{meta['name']}"] = (
                meta["uid"],
                base64.b64decode(token).decode() if token else None,
            )
    return objects


@pytest.fixture
def production(deployment: Deployment) -> Iterator[Deployment]:
    """The second install: its own Hugging Face account (a token preflight's whoami accepts,
    with the model's licence) in its own connection."""
    facts = deployment.sandbox.google.facts
    facts.hf_tokens[PRODUCTION_TOKEN] = PRODUCTION_HF_USER
    facts.licences.add((PRODUCTION_HF_USER, TUTORIAL_MODEL))
    token = json.dumps({"conn_type": "generic", "password": PRODUCTION_TOKEN})
    with (
        harness_folder("tpu-rl-production-") as folder,
        another_deployment(
            deployment, folder, {**DEPLOYER_ENV, "AIRFLOW_CONN_HUGGINGFACE_DEFAULT": token}
        ) as d,
    ):
        yield d


def test_two_deployments_share_a_cluster_and_bucket(
    deployment: Deployment, production: Deployment, e2e_report
) -> None:
    staging, box = deployment, deployment.sandbox
    cluster, bucket = settings_for(NAME)["cluster_name"], settings_for(NAME)["gcs_bucket"]
    room_for_both = {**EXISTING_CLUSTER_VARS, "num_slices": 2}  # Kueue admits one run a slice
    add_running_cluster(box.state_file, cluster, SETTINGS["project"], room_for_both)
    try:
        first = start_run(staging, staging.api(), NAME, hold_training_s=HOLD_S, **SHARED)
        wait_for_event(staging.api(), first, first.training_held, "training's first evaluation")
        staging.api().wait_task(first.run_id, "wait_for_rewards", {"deferred"})
        in_flight = cluster_objects(staging)
        assert {k.split("/")[0] for k in in_flight} >= {"jobs", "secrets"}, in_flight
        second = start_run(production, production.api(), NAME, hold_training_s=HOLD_S, **SHARED)
        first.name, second.name = f"{NAME}_staging", f"{NAME}_production"
        production.api().wait_task(second.run_id, "wait_for_rewards", {"deferred"})
        # both at their reward wait: staging's objects are all there, unchanged (same uid, its
        # own token); production made a Job and a token Secret of its own (it followed none)
        both = cluster_objects(staging)
        assert {k: both.get(k) for k in in_flight} == in_flight
        made = {k: v for k, v in both.items() if k not in in_flight}
        assert {k.split("/")[0] for k in made} >= {"jobs", "secrets"}, sorted(both)
        tokens = {v[1] for v in made.values() if v[1]}
        assert tokens == {PRODUCTION_TOKEN}, "production's Secret carries another token"
        assert {v[1] for v in in_flight.values() if v[1]} == {HF_TOKEN}

        second.training_released.set()
        finish(production, second, "success", e2e_report)  # its cleanup removed its own only
        assert {k: v for k, v in cluster_objects(staging).items() if k in in_flight} == in_flight
        sweep = {
            "project": SETTINGS["project"],
            "region": SETTINGS["region"],
            "gcs_bucket": bucket,
            "existing_clusters": [cluster],
            "dry_run": False,
            "grace_minutes": 0,
        }
        api = production.api()
        janitor = api.trigger(sweep, "proc__production_janitor", "tpu_rl_janitor")
        assert api.wait_finished(janitor["dag_run_id"], "tpu_rl_janitor") == "success"
        assert {k: v for k, v in cluster_objects(staging).items() if k in in_flight} == in_flight
        assert cluster in box.clusters(), "production's janitor removed the shared cluster"

        first.training_released.set()
        finish(staging, first, "success", e2e_report)
        names = box.gcs.names(bucket)
        exports = {n.split("/hf-trained/")[1].split("/")[0] for n in names if "/hf-trained/" in n}
        checkpoints = {n.split("/checkpoints/")[0] for n in names if "/checkpoints/" in n}
        assert len(exports) == 2 and len(checkpoints) == 2, (sorted(exports), sorted(checkpoints))
        assert len({staging.identity(), production.identity()}) == 2
    finally:
        # a failed check leaves staging's run going: end it as the UI would, before its cluster
        # goes, so that the next scenarios (max_active_runs=1) do not wait behind it
        with contextlib.suppress(AssertionError):  # no such run: it never started
            if staging.api().run(f"proc__{NAME}")["state"] not in FINISHED:
                staging.api().mark_run(f"proc__{NAME}", "failed")
                staging.api().wait_finished(f"proc__{NAME}")
        state = json.loads(box.state_file.read_text())
        state["clusters"].pop(cluster, None)  # its nodes go: the next scenarios' own clusters
        box.state_file.write_text(json.dumps(state))
