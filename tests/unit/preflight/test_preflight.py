"""Preflight's pieces without a cloud: the deployment's endpoints and PriorityClass."""

from __future__ import annotations

import pytest

from tpu_rl import deployment
from tpu_rl.backend.jobset import backend_jobset
from tpu_rl.jobs.manifests import conversion_job, train_job
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import load_settings


def test_api_endpoints_default_to_https_and_take_the_deployments_overrides(monkeypatch):
    monkeypatch.delenv("TPU_RL_API_ENDPOINTS", raising=False)
    assert deployment.api_endpoint("compute.googleapis.com") == "https://compute.googleapis.com"
    monkeypatch.setenv("TPU_RL_API_ENDPOINTS", '{"compute.googleapis.com": "http://h:1/x/"}')
    assert deployment.api_endpoint("compute.googleapis.com") == "http://h:1/x"
    assert deployment.api_endpoint("huggingface.co") == "https://huggingface.co"
    monkeypatch.setenv("TPU_RL_API_ENDPOINTS", "[1]")
    with pytest.raises(deployment.DeploymentError, match="must be a JSON object"):
        deployment.api_endpoint("huggingface.co")


def test_every_pod_of_the_run_names_the_deployments_priority_class(monkeypatch, tutorial_conf):
    layout = RunLayout(load_settings(tutorial_conf), "manual__p", "dep")
    monkeypatch.delenv("TPU_RL_PRIORITY_CLASS", raising=False)
    assert "priorityClassName" not in train_job(layout)["spec"]["template"]["spec"]
    monkeypatch.setenv("TPU_RL_PRIORITY_CLASS", "high")
    pods = [
        train_job(layout)["spec"]["template"]["spec"],
        conversion_job(layout)["spec"]["template"]["spec"],
        *(
            rj["template"]["spec"]["template"]["spec"]
            for rj in backend_jobset(layout)["spec"]["replicatedJobs"]
        ),
    ]
    assert [pod.get("priorityClassName") for pod in pods] == ["high"] * 4
