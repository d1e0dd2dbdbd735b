"""Every task documented; the console links each task carries."""

from __future__ import annotations

import pytest

from sandbox.dagbags import DagBag
from tests.conftest import REPO
from tests.run_steps import RUN_STEPS
from tests.support.run_links import LINKS_BY_TASK
from tpu_rl.dag import links

TASK_DOCS = {step.step_id: step.step_doc for step in RUN_STEPS}


@pytest.fixture(scope="module")
def dag():
    return DagBag(str(REPO / "dags")).dags["tpu_rl_post_training"]


def test_every_task_has_its_documentation(dag):
    assert {t.task_id for t in dag.tasks} == set(TASK_DOCS)
    for task in dag.tasks:
        assert task.doc_md and len(task.doc_md.strip()) > 60, task.task_id


def test_tasks_carry_their_console_links(dag):
    assert set(LINKS_BY_TASK) <= {t.task_id for t in dag.tasks}
    names = {t.task_id: [link.name for link in t.operator_extra_links] for t in dag.tasks}
    assert names["train"] == [
        "Kubernetes Job",  # the provider's name for its own (replaced) link
        "Pod logs (Cloud Logging)",
        "Checkpoints (Cloud Storage)",
    ]
    assert isinstance(dag.get_task("train").operator_extra_links[0], links.KubernetesJobLink)
    assert "Exported model (Cloud Storage)" in names["verify"]
    assert names["create_cluster"] == ["GKE cluster"]
    assert names["validate"] == []


def test_links_survive_serialization(dag):
    from airflow.serialization.serialized_objects import DagSerialization

    restored = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    assert "Pod logs (Cloud Logging)" in restored.get_task("wait_for_rewards").extra_links
