"""A run's OpenLineage events, sent by the provider's own listener from Airflow's real processes to
a backend on loopback (sandbox/lineage_receiver.py, answering as Marquez does): nothing while no
transport is configured; once it is, a refused run's failure carries its error, and a whole run
with held-out evaluation and a Vertex AI registry emits schema-valid events within Dataplex's
limits whose inputs and outputs form the champion's provenance chain, base model to registry
version."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

# the provider is an optional extra: the compat tier (Airflow 3.1.8) runs without it
pytest.importorskip("airflow.providers.openlineage")

from sandbox.harness import HELDOUT
from sandbox.kube_state import image_id
from sandbox.lineage_receiver import LineageReceiver, lineage_receiver
from sandbox.processes.api import LOADED_WAIT_S, AirflowApi
from sandbox.processes.deployment import Deployment
from sandbox.processes.runs import Run, finish, start_run
from sandbox.vertex_api import VertexRegistryFake
from tests.conftest import REPO
from tests.support.openlineage_events import (
    completed,
    event_problems,
    graph_text,
    job_of,
    step_lineage,
)
from tests.support.process_runs import registry_env
from tpu_rl.layout import RunLayout
from tpu_rl.lineage.facets import EVALUATION, KEYS, TPU
from tpu_rl.lineage.graph import check_event, provenance_chain, run_datasets, run_lineage
from tpu_rl.names import DAG_ID, Step
from tpu_rl.settings.run_settings import load_settings

# after test_promotion_approval in its group (make test: --dist loadgroup): the scheduler keeps
# that test's registry settings, then takes the transport
pytestmark = [
    pytest.mark.xdist_group("processes-2"),
    pytest.mark.relaunches(order=3),
]
NAMESPACE = "tpu-rl-sandbox"
ARTIFACTS = REPO / "test-artifacts"
REFUSED = {"cluster_name": "-not-a-valid-name-"}  # validate refuses it before any cloud call
CONF = {**HELDOUT, "approval": "none"}
DATASET_STEPS = [
    Step.CONVERT,
    Step.WAIT_FOR_REWARDS,
    Step.EVALUATE_HELDOUT,
    Step.EXPORT,
    Step.PROMOTE,
]


def lineage_env(env: dict[str, dict[str, str]], receiver: LineageReceiver) -> dict:
    """`env` with the provider's transport to the receiver, for the scheduler (with
    LocalExecutor the task processes are its children, with its environment)."""
    transport = {
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(receiver.transport()),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": NAMESPACE,
    }
    return {**env, "scheduler": {**env["scheduler"], **transport}}


def events_of(receiver: LineageReceiver, run: Run) -> list[Mapping[str, Any]]:
    """The run's events: its DAG run's, and its tasks' (their parent is the DAG run)."""
    dag_runs = {
        e["run"]["runId"]
        for e in receiver.events()
        if e["job"]["name"] == DAG_ID
        and e["run"]["facets"].get("airflowDagRun", {}).get("dagRun", {}).get("run_id")
        == run.run_id
    }
    return [
        e
        for e in receiver.events()
        if e["run"]["runId"] in dag_runs
        or e["run"]["facets"].get("parent", {}).get("run", {}).get("runId") in dag_runs
    ]


def dag_run_ended(receiver: LineageReceiver, run: Run) -> bool:
    """The scheduler sent the DAG run's last event (it sends it after the run's state is set:
    the test may see the state first)."""
    ended = {"COMPLETE", "FAIL"}
    return any(job_of(e) == DAG_ID and e["eventType"] in ended for e in events_of(receiver, run))


def refused_at_validate(api: AirflowApi, run: Run) -> bool:
    """The run ended failed at validate (refused before anything was made: no finish(), whose
    report reads the deployment identity the refused run never generated, as a first run)."""
    state = api.wait_finished(run.run_id)
    return state == "failed" and api.task_states(run.run_id)["validate"] == "failed"


def test_a_runs_events_form_the_champions_provenance(deployment: Deployment, e2e_report):
    api, vertex = deployment.api(), VertexRegistryFake()
    env = registry_env(deployment, vertex)
    try:
        with lineage_receiver() as receiver:
            deployment.relaunch(env)
            off = start_run(deployment, api, "lineage_off", **REFUSED)
            assert refused_at_validate(api, off)
            assert receiver.events() == []  # lineage off: the provider sends nothing

            deployment.relaunch(lineage_env(env, receiver))
            refused = start_run(deployment, api, "lineage_refused", **REFUSED)
            assert refused_at_validate(api, refused)
            api.wait(
                "the refused run's last event",
                lambda: dag_run_ended(receiver, refused),
                LOADED_WAIT_S,
            )
            run = start_run(deployment, api, "lineage", **CONF)
            tasks = finish(deployment, run, "success", e2e_report)
            api.wait("the run's last event", lambda: dag_run_ended(receiver, run), LOADED_WAIT_S)
            failed, events = events_of(receiver, refused), events_of(receiver, run)
    finally:
        vertex.stop()
    assert tasks["promote"] == "success", tasks

    # a failure carries its error: the provider's errorMessage facet, from the exception
    [fail] = [e for e in failed if e["eventType"] == "FAIL" and job_of(e) == f"{DAG_ID}.validate"]
    error = fail["run"]["facets"]["errorMessage"]
    assert "cluster_name: '-not-a-valid-name-'" in error["message"], error
    assert not fail.get("outputs")

    # every event is a valid OpenLineage run event that Dataplex takes
    for event in [*failed, *events]:
        assert event_problems(event) == [], (job_of(event), event["eventType"])
        check_event(event)
        assert event["job"]["namespace"] == NAMESPACE

    # the steps' COMPLETE events name what the run's layout says each step read and wrote
    layout = RunLayout(load_settings(run.settings), run.run_id, deployment.identity())
    report = api.xcom(run.run_id, Step.EVALUATE_HELDOUT)
    exported = api.xcom(run.run_id, Step.EXPORT)
    datasets = run_datasets(
        layout,
        committed=[10, 20, 30, 40],
        exported=exported["step"],
        scored=[int(step) for step in report["step_scores"]],
        registry_version=api.xcom(run.run_id, Step.PROMOTE)["registry_version"],
    )
    done = completed(events)
    found = {step: step_lineage(done[f"{DAG_ID}.{step}"]) for step in DATASET_STEPS}
    assert found == run_lineage(datasets)
    chain = provenance_chain(found, datasets)
    ARTIFACTS.mkdir(exist_ok=True)  # what the run sent, for a person (docs/lineage.md)
    (ARTIFACTS / "lineage-events.md").write_text(graph_text(events))
    print("\nprovenance chain from the captured events:")
    for link in chain:
        print(f"  {link.label:17} {link.step:17} {link.dataset.fqn if link.dataset else '(run)'}")

    # our facets: the held-out evaluation on its step, the run's TPUs and cost on its verdict
    evaluation = done[f"{DAG_ID}.{Step.EVALUATE_HELDOUT}"]["run"]["facets"][KEYS[EVALUATION]]
    assert (evaluation["source"], evaluation["step"]) == ("heldout", exported["step"])
    assert evaluation["verdicts"]["vsBase"] == "better"
    tpu = done[f"{DAG_ID}.{Step.OUTCOME}"]["run"]["facets"][KEYS[TPU]]
    assert (tpu["tpuType"], tpu["capacityMode"]) == (layout.settings.tpu_type, "reservation")
    assert tpu["chipHours"] > 0 and "costUsd" not in tpu  # a reservation: no spend of its own
    # the Job steps' TPU facets name the MaxText image (a tag) by the digest its pods reported
    reported = image_id(layout.settings.cloud_image_name).split("@")[1]
    for step in (Step.CONVERT, Step.EVALUATE_HELDOUT, Step.EXPORT):
        ran = done[f"{DAG_ID}.{step}"]["run"]["facets"][KEYS[TPU]]["images"]
        assert {i["role"]: i.get("digest") for i in ran}["maxtext"] == reported, step
