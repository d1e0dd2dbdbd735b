"""The Pathways backend's lifecycle (tpu_rl.backend.lifecycle): its pods, its submission, and
what a failed wait raises. Against the API emulator: tests/integration/test_backend_runs.py."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
from kubernetes.client.rest import ApiException

from tpu_rl.backend import lifecycle
from tpu_rl.kube import verdicts
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import load_settings

LOG = logging.getLogger(__name__)


@pytest.fixture
def layout(tutorial_conf) -> RunLayout:
    """The tutorial's run without a Kueue queue: the submission asks Kueue nothing."""
    settings = dataclasses.replace(load_settings(tutorial_conf), kueue_queue="")
    return RunLayout(settings, "manual__1", "test-deployment")


def test_the_backend_is_a_head_and_a_worker_per_host_of_every_slice(layout):
    assert lifecycle.backend_pod_count(layout) == 1 + 8
    two = RunLayout(
        dataclasses.replace(layout.settings, cluster_nodepool_count=2), "m", "d"
    )  # past validate's one slice, for the arithmetic
    assert lifecycle.backend_pod_count(two) == 1 + 16


class Custom:
    """CustomObjectsApi's create, answering `status` (201: created)."""

    def __init__(self, status: int = 201) -> None:
        self.status, self.created = status, []

    def create_namespaced_custom_object(self, namespace: str, body: Any, **jobset: str) -> None:
        self.created.append((namespace, body["metadata"]["name"], jobset["plural"]))
        if self.status != 201:
            raise ApiException(status=self.status)


def test_the_backend_is_submitted_once_and_a_second_try_keeps_it(layout):
    api = Custom()
    assert lifecycle.submit_backend(api, layout, LOG) is True
    assert api.created == [("default", layout.backend_jobset, "jobsets")]
    assert lifecycle.submit_backend(Custom(409), layout, LOG) is False
    with pytest.raises(ApiException):
        lifecycle.submit_backend(Custom(403), layout, LOG)


def test_a_kueue_refusal_fails_without_retries_and_other_failures_may_retry():
    refused = {"status": "error", "reason": verdicts.KUEUE_REFUSED, "message": "never admitted"}
    failure = lifecycle.backend_failure(refused)
    assert type(failure) is AirflowFailException
    assert str(failure) == "Pathways backend: never admitted"
    timeout = lifecycle.backend_failure({"status": "error", "message": "0/9 pods running"})
    assert type(timeout) is AirflowException
    assert str(timeout) == "0/9 pods running (TPU capacity or Kueue)"
    assert lifecycle.backend_failure({"status": "success"}) is None
