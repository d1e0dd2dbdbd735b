"""A Job's wait for its pods then its end (tpu_rl.jobs.job_trigger): host 0's pod, the end of a
Job and the provider's event for it. The wait against the API emulator:
tests/integration/test_job_trigger.py."""

from __future__ import annotations

from kubernetes.client import V1Job, V1JobCondition, V1JobStatus, V1ObjectMeta

from tpu_rl.jobs.job_trigger import COMPLETION_INDEX, ended_job_event, host_zero, job_ended


def meta(name: str, index: str | None = None, *, annotation: bool = False) -> dict:
    where = "annotations" if annotation else "labels"
    return {"name": name, where: {COMPLETION_INDEX: index}} if index is not None else {"name": name}


def test_host_zero_is_the_pod_of_completion_index_zero():
    pods = [meta("job-b", "1"), meta("job-z", "0"), meta("job-a", "10")]
    assert host_zero(pods) == ["job-z"]
    assert host_zero([meta("job-b", "1"), meta("job-c", "0", annotation=True)]) == ["job-c"]


def test_pods_without_an_index_come_after_indexed_ones_by_name():
    assert host_zero([meta("job-a"), meta("job-b", "3")]) == ["job-b"]
    assert host_zero([meta("job-b"), meta("job-a"), meta("job-c", "x")]) == ["job-a"]
    assert host_zero([]) == []


def job(*conditions: tuple[str, str, str | None]) -> V1Job:
    return V1Job(
        metadata=V1ObjectMeta(name="job-x", namespace="ns"),
        status=V1JobStatus(
            conditions=[V1JobCondition(type=t, status=s, reason=r) for t, s, r in conditions]
        ),
    )


def test_a_job_has_ended_once_complete_or_failed_is_true():
    assert job_ended(job(("Complete", "True", None)))
    assert job_ended(job(("Failed", "True", "DeadlineExceeded")))
    assert not job_ended(job(("Failed", "False", None), ("Suspended", "True", None)))
    assert not job_ended(V1Job(metadata=V1ObjectMeta(name="x")))


def test_the_event_of_a_failed_job_is_the_providers_error_with_its_reason():
    event = ended_job_event(job(("Failed", "True", "BackoffLimitExceeded")), ["job-x-0"])
    assert (event["status"], event["message"]) == (
        "error",
        "Job failed with error: BackoffLimitExceeded",
    )
    assert (event["name"], event["namespace"], event["pod_namespace"]) == ("job-x", "ns", "ns")
    assert event["pod_names"] == ["job-x-0"] and event["job"]["metadata"]["name"] == "job-x"


def test_the_event_of_a_complete_job_without_logs_names_no_pods():
    event = ended_job_event(job(("Complete", "True", None)), None)
    assert (event["status"], event["message"]) == ("success", "Job completed successfully")
    assert event["pod_names"] is None and event["pod_namespace"] is None
    assert event["xcom_result"] is None
