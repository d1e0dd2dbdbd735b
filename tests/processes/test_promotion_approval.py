"""A promotion that waits for a person, on real Airflow processes: the run's `approve` task parks
in Airflow's awaiting_input state after the cleanups (the run's note links its Required Actions
page meanwhile), a person answers through the REST API that page calls, and `promote` follows
(approved: the champion record and one new Vertex AI version with the champion alias, on the
loopback fake) or is skipped (rejected: nothing promoted, no registry call, the run still
succeeds)."""

from __future__ import annotations

import json

import psutil
import pytest

from sandbox.processes.api import LOADED_WAIT_S
from sandbox.processes.deployment import Deployment
from sandbox.processes.runs import UNTIL_RELEASED_S, Run, finish, start_run
from sandbox.vertex_api import VertexRegistryFake
from tests.support.process_runs import (
    MODEL_ID,
    registry_env,
    release_after_the_deferral,
    wait_for_exit_read,
)
from tpu_rl.names import DAG_ID

# In the package layouts' process group (make test: --dist loadgroup), after the installed
# layout (test_package_layouts.RUN_ORDER): only the scheduler's environment differs.
pytestmark = [
    pytest.mark.xdist_group("processes-2"),
    pytest.mark.relaunches(order=2),
]


def ask_then_answer(deployment: Deployment, run: Run, option: str) -> dict:
    """Wait for the question, then answer as a person does: after the worker that asked has
    exited and the scheduler has taken its exit. An answer inside that second is lost to an
    Airflow 3.3.2 race: process_executor_events (jobs/scheduler_job_runner.py) forgives the
    exit event of a try resumed before the event is read only in SCHEDULED state (its
    "Resume-after-defer" case), so a try already QUEUED again is marked FAILED."""
    api = deployment.api()
    asked = api.wait_task(run.run_id, "approve", {"awaiting_input"})
    pid = asked.get("pid")
    api.wait(
        "approve's worker to exit", lambda: not pid or not psutil.pid_exists(pid), LOADED_WAIT_S
    )
    wait_for_exit_read(deployment, run, "approve")
    return api.respond(run.run_id, "approve", option)


def test_approved_then_rejected_through_the_rest_api(deployment: Deployment, e2e_report) -> None:
    api, vertex = deployment.api(), VertexRegistryFake()
    deployment.relaunch(registry_env(deployment, vertex))
    try:
        approved = start_run(
            deployment,
            api,
            "approval_approved",
            approval="required",
            hold_training_s=UNTIL_RELEASED_S,
        )
        release_after_the_deferral(deployment, approved)
        api.wait_task(approved.run_id, "approve", {"awaiting_input"})
        states = api.task_states(approved.run_id)
        assert states["cleanup_cluster"] == "success" and states["promote"] is None, states
        asked = api.hitl_detail(approved.run_id, "approve")
        assert asked["options"] == ["Approve", "Reject"] and asked["defaults"] == ["Reject"]
        assert "## Evaluation" in asked["body"] and "TPU cost so far:" in asked["body"]
        # the base model, the champion (none: the deployment's first) and this export
        columns = "| metric | base (pre-training) | champion: none yet | this export (challenger) |"
        assert columns in asked["body"] and "Gate: passed" in asked["body"], asked["body"]
        # the run's page leads with the link to the decision while it waits
        note = api.run(approved.run_id)["note"]
        decision = f"/dags/{DAG_ID}/runs/{approved.run_id}/tasks/approve/required_actions"
        assert note.startswith("**Awaiting approval**: [Approve or reject](") and decision in note
        ask_then_answer(deployment, approved, "Approve")
        tasks = finish(deployment, approved, "success", e2e_report)
        assert tasks["approve"] == tasks["promote"] == "success", tasks
        bucket, result = approved.settings["gcs_bucket"], api.xcom(approved.run_id, "promote")
        record_uri = result["champion_uri"]
        assert record_uri.startswith(f"gs://{bucket}/") and record_uri.endswith(
            f"/champions/{deployment.identity()}.json"
        )
        record = json.loads(deployment.sandbox.gcs.read(record_uri))
        assert record["run_id"] == approved.run_id and record["previous"] == []
        assert result["registry_version"].endswith(f"/models/{MODEL_ID}@1")
        # the model's first version: models.get answers 404, the upload makes it, the alias
        assert [c.path.rsplit("/", 1)[-1] for c in vertex.calls] == [
            MODEL_ID,
            "models:upload",
            f"{MODEL_ID}@1:mergeVersionAliases",
        ]
        assert vertex.calls[1].body["model"]["labels"]["tpu-rl-run"] == approved.label
        vertex.calls.clear()

        # the same bucket and model: the first run's export is the champion to keep
        rejected = start_run(
            deployment,
            api,
            "approval_rejected",
            approval="required",
            gcs_bucket=bucket,
            hold_training_s=UNTIL_RELEASED_S,
        )
        release_after_the_deferral(deployment, rejected)
        ask_then_answer(deployment, rejected, "Reject")
        tasks = finish(deployment, rejected, "success", e2e_report)
        assert tasks["approve"] == "success" and tasks["promote"] == "skipped", tasks
        assert json.loads(deployment.sandbox.gcs.read(record_uri)) == record
        assert vertex.calls == []
        note = api.run(rejected.run_id)["note"]
        assert "Promotion: not promoted: rejected by" in note, note
    finally:
        vertex.stop()
