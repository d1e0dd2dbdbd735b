"""A resume's wait for the lost attempt's Job and JobSet to go: RemovedTrigger in the
triggerer, and the reward wait, which deletes them and defers that wait (no worker slot held
while their pods end) before it submits the new backend."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException, TaskDeferred
from airflow.providers.google.common.hooks.base_google import GoogleBaseHook

from sandbox.cloud import SandboxCredentials
from sandbox.kube_emulator import KubeEmulator
from tests.support.kube_wait import JOB, JOBSET, NS, make_job, make_jobset
from tests.support.wait_task import BASE_PRE, Ti, lost
from tpu_rl import storage
from tpu_rl.backend import jobset as pathways_jobset
from tpu_rl.dag import runtime
from tpu_rl.jobs import manifests
from tpu_rl.kube import objects as kube
from tpu_rl.kube.pods_trigger import PodsReadyTrigger
from tpu_rl.kube.removed_trigger import RemovedTrigger
from tpu_rl.layout import RunLayout
from tpu_rl.operators import rewards as run_rewards
from tpu_rl.settings.run_settings import load_settings

OBJECTS = {f"Job {JOB}": kube.job_path(NS, JOB), f"JobSet {JOBSET}": kube.jobset_path(NS, JOBSET)}
CONNECTION = {"gcp_conn_id": "google_cloud_default", "impersonation_chain": None,
              "use_dns_endpoint": False}  # fmt: skip


def trigger(cluster: KubeEmulator, deadline_s: float) -> RemovedTrigger:
    return RemovedTrigger(
        objects=OBJECTS,
        deadline=time.time() + deadline_s,
        poll_interval=0.05,
        cluster_url=cluster.url,
        ssl_ca_cert=cluster.ca_b64,
        **CONNECTION,
    )


async def first_event(t: RemovedTrigger) -> dict[str, Any]:
    async for event in t.run():
        return event.payload
    raise AssertionError("no event")


async def test_fires_once_both_are_gone_however_long_that_takes(gke_emu):
    make_job(gke_emu)
    make_jobset(gke_emu)
    later = threading.Timer(
        0.3, lambda: [gke_emu.delete("jobs", NS, JOB), gke_emu.delete("jobsets", NS, JOBSET)]
    )
    later.start()
    started = time.monotonic()
    assert await first_event(trigger(gke_emu, 30)) == {"status": "success"}
    assert time.monotonic() - started >= 0.3
    later.join()


async def test_names_what_is_left_at_the_deadline(gke_emu):
    make_jobset(gke_emu)
    event = await first_event(trigger(gke_emu, 0.2))
    assert event == {"status": "error", "message": f"JobSet {JOBSET} not deleted in time"}


def test_round_trips_through_its_serialized_form():
    kwargs = {"objects": OBJECTS, "deadline": 1.0, "poll_interval": 2.0,
              "cluster_url": "https://x", "ssl_ca_cert": "Y2E=", **CONNECTION}  # fmt: skip
    classpath, serialized = RemovedTrigger(**kwargs).serialize()
    assert classpath == "tpu_rl.kube.removed_trigger.RemovedTrigger" and serialized == kwargs


@pytest.fixture
def sensor(tutorial_conf, monkeypatch, gke_emu, gcs_objects):
    conf = {**tutorial_conf, "capacity": "spot", "reservation": "", "kueue_queue": ""}
    layout = RunLayout(load_settings(conf), "manual__1", "test-deployment")
    monkeypatch.setattr(runtime, "layout_from_context", lambda context: layout)
    monkeypatch.setattr(storage, "newest_committed_step", lambda uri, conn: (50, [60]))
    credentials = SandboxCredentials(SimpleNamespace(token=gke_emu.token))  # the sync hook's
    monkeypatch.setattr(
        GoogleBaseHook, "get_credentials_and_project_id", lambda hook: (credentials, "p")
    )
    cls = run_rewards.WaitForRewardsSensor
    monkeypatch.setattr(cls, "mask_token", lambda op: None)
    op = cls(task_id="wait_for_rewards", project_id="p", location="l", cluster_name="c")
    op.layout = layout  # type: ignore[attr-defined]
    return op


def test_a_resume_deletes_the_lost_attempt_and_defers_the_wait_for_it_to_go(sensor, gke_emu):
    """Before this, the worker slept until both were gone (up to 300 s, pods' grace periods
    included); now it returns at once, and a second deferral submits the new backend."""
    layout = sensor.layout
    job, jobset = layout.job_names["train"], layout.backend_jobset
    gke_emu.create(manifests.train_job(layout))
    gke_emu.create(pathways_jobset.backend_jobset(layout))
    context = {"ti": Ti()}
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute_complete(context, lost(BASE_PRE, 60))
    assert isinstance(deferred.value.trigger, RemovedTrigger)
    assert deferred.value.method_name == "resubmit_backend"
    assert set(deferred.value.trigger.kwargs["objects"]) == {f"Job {job}", f"JobSet {jobset}"}
    assert gke_emu.get("jobs", NS, job) is None and gke_emu.get("jobsets", NS, jobset) is None

    with pytest.raises(AirflowException, match="resume: JobSet x not deleted in time"):
        sensor.resubmit_backend(
            context, {"status": "error", "message": "JobSet x not deleted in time"}
        )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.resubmit_backend(context, {"status": "success"})
    assert isinstance(deferred.value.trigger, PodsReadyTrigger)
    assert deferred.value.method_name == "resume_training"
    assert gke_emu.get("jobsets", NS, jobset) is not None  # the new backend, same name
    assert context["ti"].pushed["attempts"][-1]["started"] is not None
