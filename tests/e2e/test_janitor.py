"""The janitor DAG in the sandbox: what a killed run left is removed, and nothing else.

Three clusters, each with its own Kubernetes API emulator: `gemma4-rl` (a run killed mid-training
left its JobSet, Job and Secret, beside an unlabelled Job of someone else, the same leftovers of
a run of ANOTHER Airflow deployment, and a Job of another DAG), `rl-busy` (an active run's
objects) and `shared` (labelled, but listed in existing_clusters: a leftover Job only);
`foreign` has no labels and `elsewhere` is another deployment's. One test, phases in order,
each a dag.test() run of the janitor.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from sandbox.harness import SETTINGS, Sandbox
from sandbox.kube_emulator import KubeEmulator, running_emulator
from tests.support.e2e_runs import janitor_run
from tpu_rl.backend import jobset as pathways_jobset
from tpu_rl.cluster.blueprint import cluster_labels, default_state_prefix, deployment_vars
from tpu_rl.jobs import manifests
from tpu_rl.layout import RunLayout
from tpu_rl.names import DAG_ID
from tpu_rl.run_record import run_record
from tpu_rl.settings.run_settings import load_settings

KILLED_RUN = "manual__2026-01-01T00:00:00+00:00"
OLD_RUN = "manual__2025-12-01T00:00:00+00:00"
OTHER_DEPLOYMENT_RUN = "manual__2025-12-24T00:00:00+00:00"
ACTIVE_RUN = "manual__active-run"
MANAGED = "app.kubernetes.io/managed-by=tpu-rl-airflow"
BASE_CONF = {
    "project": SETTINGS["project"],
    "region": SETTINGS["region"],
    "gcs_bucket": SETTINGS["gcs_bucket"],
    "existing_clusters": ["shared"],
}

pytestmark = pytest.mark.timeout(180)


THIS_DEPLOYMENT = "this-airflow"  # the janitor's, stored where the deployment keeps it
OTHER_DEPLOYMENT = "another-airflow"


def layout(run_id: str, cluster: str, deployment: str = THIS_DEPLOYMENT) -> RunLayout:
    return RunLayout(load_settings({**SETTINGS, "cluster_name": cluster}), run_id, deployment)


def create_aged(emu: KubeEmulator, obj: dict[str, Any], age: timedelta) -> None:
    """Create through the emulator with a creationTimestamp `age` ago."""
    with mock.patch("sandbox.kube_state.now", return_value=datetime.now(UTC) - age):
        emu.create(copy.deepcopy(obj))


def run_objects(emu: KubeEmulator, lay: RunLayout, age: timedelta) -> None:
    """What a run has at training time: the backend JobSet, the training Job, the token Secret."""
    create_aged(emu, pathways_jobset.backend_jobset(lay), age)
    create_aged(emu, manifests.train_job(lay), age)
    create_aged(emu, manifests.token_secret(lay, "hf_NotARealToken"), age)


def add_cluster(
    state_file: Path,
    name: str,
    labelled: bool,
    age: timedelta,
    deployment: str = THIS_DEPLOYMENT,
) -> None:
    """A cluster record as the fake gcluster deploy writes it, created `age` ago."""
    settings = load_settings({**SETTINGS, "cluster_name": name})
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    state.setdefault("clusters", {})[name] = {
        "status": "RUNNING",
        "project": settings.project,
        "location": settings.region,
        "labels": cluster_labels(settings, deployment) if labelled else {},
        "vars": deployment_vars(settings),
        "create_time": (datetime.now(UTC) - age).isoformat(),
    }
    key = f"{settings.gcs_bucket}/{default_state_prefix(settings)}"
    state.setdefault("tfstate", {})[key] = [name]
    state_file.write_text(json.dumps(state))


def everything(*emus: KubeEmulator) -> list[list[str]]:
    return [
        sorted(
            f"{p}/{o['metadata']['name']}"
            for p in ("jobs", "jobsets", "secrets")
            for o in e.list(p)
        )
        for e in emus
    ]


def make_active_run() -> None:
    """A running tpu_rl_post_training run on rl-busy, past its validate task."""
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from airflow.utils.types import DagRunTriggeredByType

    from sandbox.dagbags import bundle_dag_bag, sync_bag_to_db

    manager = DagBundlesManager()
    manager.sync_bundles_to_db()
    for bundle in manager.get_all_dag_bundles():
        bundle.initialize()
        bag = bundle_dag_bag(bundle.path, bundle)
        sync_bag_to_db(bag, bundle.name, bundle.version)
    conf = {**SETTINGS, "cluster_name": "rl-busy"}
    with create_session() as session:  # the only active run: the worker's DB outlives tests
        session.query(DagRun).filter(
            DagRun.dag_id == DAG_ID, DagRun.state.in_(("running", "queued"))
        ).update({"state": "failed"}, synchronize_session=False)
    trigger_dag(DAG_ID, triggered_by=DagRunTriggeredByType.TEST, run_id=ACTIVE_RUN, conf=conf)
    with create_session() as session:
        session.query(DagRun).filter_by(dag_id=DAG_ID, run_id=ACTIVE_RUN).update(
            {"state": "running"}
        )
        session.query(TaskInstance).filter_by(
            dag_id=DAG_ID, run_id=ACTIVE_RUN, task_id="validate"
        ).update({"state": "success"})
    XComModel.set(
        key="return_value",
        value=run_record(load_settings(conf).to_dict(), THIS_DEPLOYMENT),
        dag_id=DAG_ID,
        task_id="validate",
        run_id=ACTIVE_RUN,
        serialize=False,  # stored as a task's push stores it: JSON as the Task SDK sent it
    )


def set_run_state(run_id: str, state: str) -> None:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        session.query(DagRun).filter_by(dag_id=DAG_ID, run_id=run_id).update({"state": state})


def janitor(conf: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """One janitor run on BASE_CONF with `conf` over it."""
    return janitor_run({**BASE_CONF, **conf})


def gcluster_calls() -> list[list[str]]:
    path = Path(os.environ["FAKE_CLOUD_LOG"])
    lines = path.read_text().splitlines() if path.exists() else []
    return [
        json.loads(line)["argv"][:2] for line in lines if json.loads(line)["tool"] == "gcluster"
    ]


def cluster_names(state_file: Path) -> set[str]:
    return set(json.loads(state_file.read_text())["clusters"])


@contextlib.contextmanager
def sandbox(tmp_path: Path):
    from google.cloud.container_v1 import ClusterManagerClient

    with (
        Sandbox(tmp_path).up() as box,
        running_emulator() as busy_emu,
        running_emulator() as shared_emu,
        mock.patch.object(
            ClusterManagerClient,
            "list_clusters",
            lambda client, parent=None, **kw: box.control_plane.list_clusters(parent),
        ),
    ):
        box.control_plane.endpoints.update({"rl-busy": busy_emu, "shared": shared_emu})
        yield box, busy_emu, shared_emu


def test_janitor_removes_only_what_no_active_run_owns(airflow_db, tmp_path: Path) -> None:
    from airflow.models.variable import Variable

    with sandbox(tmp_path) as (box, busy_emu, shared_emu):
        Variable.set("tpu_rl_deployment_id", THIS_DEPLOYMENT)  # the janitor reads it there
        emu, state_file = box.emu, box.state_file
        three_hours, five_hours = timedelta(hours=3), timedelta(hours=5)
        for name, labelled in (("gemma4-rl", True), ("rl-busy", True), ("shared", True)):
            add_cluster(state_file, name, labelled, five_hours)
        add_cluster(state_file, "foreign", False, five_hours)
        killed = layout(KILLED_RUN, "gemma4-rl")
        run_objects(emu, killed, three_hours)
        foreign_job = manifests.train_job(killed)
        foreign_job["metadata"] = {"name": "someone-elses-job", "labels": {"team": "other"}}
        create_aged(emu, foreign_job, three_hours)
        other_deployment = layout(OTHER_DEPLOYMENT_RUN, "gemma4-rl", OTHER_DEPLOYMENT)
        run_objects(emu, other_deployment, three_hours)
        add_cluster(state_file, "elsewhere", True, five_hours, OTHER_DEPLOYMENT)
        other_dag_job = manifests.train_job(layout(OLD_RUN, "gemma4-rl"))
        other_dag_job["metadata"]["labels"]["tpu-rl.dev/dag"] = "some_other_dag"
        create_aged(emu, other_dag_job, three_hours)
        run_objects(busy_emu, layout(ACTIVE_RUN, "rl-busy"), three_hours)
        create_aged(shared_emu, manifests.conversion_job(layout(OLD_RUN, "shared")), three_hours)
        make_active_run()
        killed_refs = {
            f"gemma4-rl/default/jobsets/{killed.backend_jobset}",
            f"gemma4-rl/default/jobs/job-{killed.train_job_base}",
            f"gemma4-rl/default/secrets/{killed.token_secret}",
        }
        shared_ref = f"shared/default/jobs/job-{layout(OLD_RUN, 'shared').convert_job_base}"
        before = everything(emu, busy_emu, shared_emu)
        clusters_before = state_file.read_text()

        # dry_run (the default): reports, changes nothing.
        state, report = janitor({})
        assert state == "success"
        assert set(report["would_remove"]) == killed_refs | {shared_ref}
        assert report["would_destroy"] == ["gemma4-rl"]
        assert report["swept"]["project"] == BASE_CONF["project"]  # the log says what was swept
        assert report["swept"]["clusters"] == ["gemma4-rl", "rl-busy", "shared"]
        assert "remove" not in report and report["failed"] == {}
        assert everything(emu, busy_emu, shared_emu) == before
        assert state_file.read_text() == clusters_before and gcluster_calls() == []

        # Within the grace period: nothing is removed.
        state, report = janitor({"dry_run": False, "grace_minutes": 600})
        assert state == "success" and report["remove"] == [] and report["destroyed"] == []
        assert everything(emu, busy_emu, shared_emu) == before

        # After it: the killed run's objects and cluster go; the rest stays.
        state, report = janitor({"dry_run": False})
        assert state == "success", report
        assert set(report["remove"]) == killed_refs | {shared_ref}
        assert report["destroyed"] == ["gemma4-rl"]
        assert report["clusters_kept"]["rl-busy"] == f"used by active run {ACTIVE_RUN}"
        assert "existing_clusters" in report["clusters_kept"]["shared"]
        active_train = f"rl-busy/default/jobs/job-{layout(ACTIVE_RUN, 'rl-busy').train_job_base}"
        assert report["kept"][active_train] == f"its run {ACTIVE_RUN} is active"
        untouched = sorted(
            [
                "jobs/someone-elses-job",
                f"jobs/job-{layout(OLD_RUN, 'gemma4-rl').train_job_base}",  # another DAG's
                f"jobsets/{other_deployment.backend_jobset}",  # another deployment's
                f"jobs/job-{other_deployment.train_job_base}",
                f"secrets/{other_deployment.token_secret}",
            ]
        )
        assert everything(emu, shared_emu) == [untouched, []]
        assert everything(busy_emu) == [before[1]]
        assert cluster_names(state_file) == {"rl-busy", "shared", "foreign", "elsewhere"}
        assert gcluster_calls() == [["create", "blueprint.yaml"], ["destroy", "gemma4-rl"]]

        # The active run ends; a deletion fails: the janitor fails, naming it.
        set_run_state(ACTIVE_RUN, "failed")
        busy_emu.inject_faults(500, 50, path_regex=r"/secrets/rl-")
        state, report = janitor({"dry_run": False})
        assert state == "failed"
        secret = f"rl-busy/default/secrets/{layout(ACTIVE_RUN, 'rl-busy').token_secret}"
        assert list(report["failed"]) == [secret]
        assert everything(busy_emu) == [[f"secrets/{layout(ACTIVE_RUN, 'rl-busy').token_secret}"]]
        assert "rl-busy" not in cluster_names(state_file)  # destroying it removes the Secret too
        assert "elsewhere" in cluster_names(state_file)  # another deployment's, never touched
