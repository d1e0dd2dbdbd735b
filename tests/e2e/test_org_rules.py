"""Settings that can do what they promise, storage as an organisation runs it: a
resume with the default settings, an Autopilot cluster refused at validate, the bucket
created under an organisation's uniform-access policy, an existing bucket without the
protections used with a warning.

Each guards a failure: defaults that save only the last step (the resume starts from 0);
validate not reading the cluster (the run goes on to the Autopilot cluster, whose Warden
refuses the host-network pods: the conversion Job gets no pod and fails on its deadline); a
bucket created without uniform access (the policy refuses it: ensure_bucket fails with HTTP
412); an existing bucket used without a word.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sandbox.gcs_policy import UNIFORM_ACCESS
from sandbox.harness import SETTINGS, Sandbox, Workloads
from tests.support.e2e_runs import reported_run
from tpu_rl.operators.cluster import EnsureBucketOperator

BUCKET = SETTINGS["gcs_bucket"]
EXISTING = {"cluster_mode": "existing", "reservation": ""}


def scenario(name: str, expected: str, workloads: Workloads | None = None) -> SimpleNamespace:
    return SimpleNamespace(name=name, expected=expected, workloads=workloads or Workloads())


def test_a_resume_with_the_default_settings_restores_a_checkpoint(
    airflow_db, tmp_path, capfd, e2e_report
):
    """Spot, every training setting at its default (50 steps): preempted at step 30, training
    resumes from step 25, not from 0 (the old defaults saved only step 50)."""
    preempted = Workloads(preempt_at_steps=(30,))
    case = scenario("spot_defaults_resume_from_a_checkpoint", "success", preempted)
    conf = {**SETTINGS, "capacity": "spot", "reservation": ""}
    with Sandbox(tmp_path).up() as box:
        result, log = reported_run(box, case, conf, capfd, e2e_report)
    assert result.preempted, "the fault did not fire"
    assert [a.restored_step for a in result.ledger.attempts] == [None, 25], result.ledger.attempts
    assert "Resuming training from checkpoint step 25 (resume 1 of 2)" in log
    assert 0 < result.ledger.steps_recomputed() <= 25


def test_an_autopilot_cluster_is_refused_at_validate(airflow_db, tmp_path, capfd, e2e_report):
    case = scenario("autopilot_cluster_refused_at_validate", "failed")
    with Sandbox(tmp_path).up("gemma4-rl", existing_cluster_vars={"autopilot": True}) as box:
        result, log = reported_run(box, case, {**SETTINGS, **EXISTING}, capfd, e2e_report)
    assert result.task_states["validate"] == "failed", result.task_states
    assert "'gemma4-rl' is a GKE Autopilot cluster; the run needs GKE Standard" in log
    assert result.gke_lookups == 1  # read from the cluster (the Container API's autopilot)
    assert result.emu.requests == [] and result.calls == []  # nothing else before the refusal
    assert result.gcs.bucket_metadata(BUCKET) is None  # not even the bucket


def test_the_bucket_is_created_as_an_organisation_policy_requires(
    airflow_db, tmp_path, capfd, e2e_report
):
    case = scenario("bucket_under_uniform_access_policy", "success")
    with Sandbox(tmp_path).up() as box:
        box.gcs.gate.constraints.add(UNIFORM_ACCESS)
        result, log = reported_run(box, case, dict(SETTINGS), capfd, e2e_report)
    bucket = result.gcs.bucket_metadata(BUCKET)
    assert bucket["iamConfiguration"]["uniformBucketLevelAccess"] == {"enabled": True}
    assert bucket["iamConfiguration"]["publicAccessPrevention"] == "enforced"
    assert bucket["versioning"] == {"enabled": True}
    rule = bucket["lifecycle"]["rule"]
    assert rule == [{"action": {"type": "Delete"}, "condition": {"daysSinceNoncurrentTime": 7}}]
    assert "Existing bucket" not in log  # it has every protection: no warning


def test_the_emulator_refuses_a_bucket_without_uniform_access_under_the_policy(tmp_path):
    from google.api_core.exceptions import PreconditionFailed

    with Sandbox(tmp_path).up() as box:
        box.gcs.gate.constraints.add(UNIFORM_ACCESS)
        with pytest.raises(PreconditionFailed, match="Request violates constraint"):
            box.gcs.client().create_bucket("fine-grained-bucket")


def test_an_existing_bucket_without_the_protections_is_used_with_a_warning(tmp_path, capfd):
    with Sandbox(tmp_path).up() as box:
        box.gcs.client().create_bucket(BUCKET)  # fine-grained access, no versioning
        op = EnsureBucketOperator(
            bucket_name=BUCKET, project_id=SETTINGS["project"], location=SETTINGS["region"]
        )
        ti = SimpleNamespace(xcom_push=lambda **kwargs: None)
        op.execute({"ti": ti, "task_instance": ti})
        bucket = box.gcs.bucket_metadata(BUCKET)
    out = capfd.readouterr()
    warned = [
        line.split("Existing bucket ", 1)[1]
        for line in (out.out + out.err).splitlines()
        if "Existing bucket " in line
    ]
    assert len(warned) == 3, warned
    assert "uniform bucket-level access is off" in warned[0]
    assert f"gcloud storage buckets update gs://{BUCKET} --uniform-bucket-level-access" in warned[0]
    assert "public access prevention is not enforced" in warned[1]
    assert "object versioning is off" in warned[2]
    # not the run's to change: used as it is
    assert bucket["iamConfiguration"]["uniformBucketLevelAccess"] == {"enabled": False}
    assert "versioning" not in bucket
