"""tpu_rl.dag.link_urls: the URLs the console links build from the run's recorded settings."""

from __future__ import annotations

from unittest import mock
from urllib.parse import unquote

import pytest
from airflow.models.taskinstancekey import TaskInstanceKey

from tests.run_steps import RUN_STEPS
from tests.support.run_links import LINKS_BY_TASK
from tpu_rl.dag import link_urls, links
from tpu_rl.run_record import recorded_settings, run_record
from tpu_rl.settings.run_settings import RunSettings, load_settings

RUN_ID = "manual__2026-11-29T10:00:00+00:00"


@pytest.fixture(autouse=True)
def fresh_settings_cache():
    """Each test's XComs stand for another run's: links keep a run's settings per process."""
    link_urls._recorded_layout.cache_clear()


@pytest.fixture
def recorded(tutorial_conf, monkeypatch):
    """XComs the run wrote, as the links read them in the worker."""
    xcoms = {
        ("validate", "return_value"): run_record(
            load_settings(tutorial_conf).to_dict(), "test-deployment"
        )
    }
    monkeypatch.setattr(
        link_urls.XCom,
        "get_one",
        lambda key, dag_id, task_id, run_id, **kw: xcoms.get((task_id, key)),
    )
    return xcoms


def key(task_id: str) -> TaskInstanceKey:
    return TaskInstanceKey("tpu_rl_post_training", task_id, RUN_ID, 1, -1)


def link_of(task_id: str, cls: type) -> str:
    [step] = [step for step in RUN_STEPS if step.step_id == task_id]
    [link] = [link for link in LINKS_BY_TASK[task_id] if isinstance(link, cls)]
    return link.get_link(step, ti_key=key(task_id))


def test_storage_links_open_the_runs_checkpoints_and_export(recorded, tutorial_conf):
    layout = link_urls.run_layout(key("gate"))
    bucket = tutorial_conf["gcs_bucket"]
    assert link_of("gate", links.CheckpointsLink) == (
        f"https://console.cloud.google.com/storage/browser/{bucket}/gemma4-26b/trained/"
        f"{layout.slug}/checkpoints/actor/;tab=objects?project={tutorial_conf['project']}"
    )
    assert link_of("verify", links.ExportLink).startswith(
        f"https://console.cloud.google.com/storage/browser/{bucket}/gemma4-26b/hf-trained/"
        f"{layout.slug}/"
    )


def test_pod_logs_query_names_the_run_and_the_job_it_watches(recorded, tutorial_conf):
    url = link_of("wait_for_rewards", links.PodLogsLink)
    assert url.startswith("https://console.cloud.google.com/logs/query;query=")
    query = unquote(url.split(";query=")[1].split(";duration=")[0])
    slug = link_urls.run_layout(key("train")).slug
    assert query.splitlines() == [
        'resource.type="k8s_container"',
        f'resource.labels.project_id="{tutorial_conf["project"]}"',
        f'resource.labels.cluster_name="{tutorial_conf["cluster_name"]}"',
        'resource.labels.namespace_name="default"',
        f'labels."k8s-pod/tpu-rl_dev/run"="{slug}"',
        f'labels."k8s-pod/job-name"="job-{slug}-train"',
    ]
    backend = unquote(link_of("start_backend", links.PodLogsLink))
    assert f'jobset-name"="{slug}-backend"' in backend


def test_gke_links_name_the_cluster(recorded, tutorial_conf):
    s = RunSettings(**recorded_settings(recorded[("validate", "return_value")]))
    assert link_of("create_cluster", links.GkeClusterLink) == (
        f"https://console.cloud.google.com/kubernetes/clusters/details/{s.region}/"
        f"{s.cluster_name}/details?project={s.project}"
    )
    workloads = link_of("start_backend", links.GkeWorkloadsLink)
    assert f"gke%2F{s.region}%2F{s.cluster_name}" in workloads
    slug = link_urls.run_layout(key("export")).slug
    assert link_of("export", links.KubernetesJobLink) == (
        f"https://console.cloud.google.com/kubernetes/job/{s.region}/{s.cluster_name}/default/"
        f"job-{slug}-export/details?project={s.project}"
    )


def test_no_link_before_the_settings_were_validated(monkeypatch):
    monkeypatch.setattr(link_urls.XCom, "get_one", lambda **kw: None)
    assert link_of("train", links.CheckpointsLink) == ""


def test_a_tasks_links_read_the_settings_once_and_nothing_else(recorded):
    """Each link of a task is computed on its own when the task ends or defers; the settings
    behind them are read once per run, not once per link (an Execution API call each), and
    the Job's name is the run's own, not read back."""
    reads = []
    read = link_urls.XCom.get_one

    def counted(**kw):
        reads.append(kw["task_id"])
        return read(**kw)

    with mock.patch.object(link_urls.XCom, "get_one", counted):
        for link in LINKS_BY_TASK["export"]:
            link.get_link(None, ti_key=key("export"))
    assert reads == ["validate"]
