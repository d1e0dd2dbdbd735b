"""The backend (the TPUs) is released however the reward wait ends, and never at the price of
the rewards: a cancelled wait's on_kill deletes it, a triggerer that stops does not (the wait
resumes elsewhere), a 5xx on the sensor's own delete does not lose the result, and a successful
wait keeps it only when asked (the champion is evaluated on it next)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from tests.support.kube_wait import (
    JOBSET,
    NS,
    C,
    make_job,
    make_jobset,
    make_pod,
    post,
    pre,
    trigger_kwargs,
    wait_for,
)
from tests.support.wait_task import Ti
from tpu_rl.dag import runtime
from tpu_rl.operators.rewards import WaitForRewardsSensor
from tpu_rl.rewards.trigger import BACKEND_KEPT, RewardTrigger
from tpu_rl.token_masking import redact

HF = "hf_ReleaseTestToken0123456789"


@pytest.fixture
def waiting(gke_emu):
    """A reward wait's cluster behind GKE's seam: the training Job and its running pod, which
    logged its Pre line, and the backend JobSet."""
    make_job(gke_emu)
    make_pod(gke_emu, "train-a")
    make_jobset(gke_emu)
    gke_emu.append_log(NS, "train-a", C, pre())
    return gke_emu


async def _wait_started(trigger: RewardTrigger) -> asyncio.Task:
    """The trigger's run() as the triggerer drives it, a few polls in (no Post line yet)."""

    async def drive() -> None:
        async for _ in trigger.run():
            return

    task = asyncio.ensure_future(drive())
    await wait_for(lambda: trigger.follower.state.pre is not None)  # the Pre line read
    assert not task.done()
    return task


async def test_a_wait_cancelled_by_a_user_releases_the_backend(waiting):
    trigger = RewardTrigger(**trigger_kwargs(waiting, backend_jobset_name=JOBSET))
    task = await _wait_started(trigger)
    task.cancel("__airflow_user_action__")  # what the triggerer sends on mark failed / clear
    with pytest.raises(asyncio.CancelledError):
        await task
    assert waiting.get("jobsets", NS, JOBSET) is not None
    await trigger.on_kill()  # the triggerer calls this for a user action only
    assert waiting.get("jobsets", NS, JOBSET) is None


async def test_a_stopping_triggerer_leaves_the_backend_to_the_resumed_wait(waiting):
    trigger = RewardTrigger(**trigger_kwargs(waiting, backend_jobset_name=JOBSET))
    task = await _wait_started(trigger)
    task.cancel()  # shutdown: no on_kill
    with pytest.raises(asyncio.CancelledError):
        await task
    await trigger.cleanup()
    assert waiting.get("jobsets", NS, JOBSET) is not None


def test_a_5xx_on_the_backend_delete_does_not_lose_the_rewards(
    gke_emu,
    monkeypatch,
    capfd,
    gcs_objects,
    masking_restored,
):
    monkeypatch.setenv(
        "AIRFLOW_CONN_HUGGINGFACE_DEFAULT", json.dumps({"conn_type": "http", "password": HF})
    )
    make_jobset(gke_emu)
    gke_emu.inject_faults(503, 5, path_regex="/jobsets/")
    # the sensor follows the run's Job and backend, named from the run
    layout = SimpleNamespace(
        settings=SimpleNamespace(namespace=NS),
        job_names={"train": "job-x"},
        backend_jobset=JOBSET,
        pool_hosts=8,
        rung="reservation@us-east5-b",
        training_attempts="gs://bucket/run/training_attempts.json",
        tensorboard_dir=None,  # no event files read
    )
    monkeypatch.setattr(runtime, "layout_from_context", lambda context: layout)
    sensor = WaitForRewardsSensor(
        task_id="wait_for_rewards",
        project_id="demo-project",
        location="us-east5",
        cluster_name="gemma4-rl",
        job_name="job-x",
        namespace=NS,
        backend_jobset_name=JOBSET,
    )
    post = {"mean_reward": 0.2, "accuracy": 18.75}
    event = {"status": "success", "pre": None, "post": post, "post_time": "t"}
    result = sensor.execute_complete({"ti": Ti()}, event)
    assert result["post"] == post
    assert HF[3:] not in redact(f"echo {HF[3:]}")  # registered in the wait's process
    assert gke_emu.get("jobsets", NS, JOBSET) is not None  # left to stop_backend and cleanup
    logged = capfd.readouterr()
    assert "Could not delete backend" in logged.out + logged.err


async def _event(trigger: RewardTrigger) -> dict:
    async for event in trigger.run():
        return event.payload
    raise AssertionError("no event")


@pytest.mark.parametrize("keep", [True, False])
async def test_a_successful_wait_keeps_the_backend_only_when_asked(waiting, keep):
    waiting.append_log(NS, "train-a", C, post())
    trigger = RewardTrigger(
        **trigger_kwargs(waiting, backend_jobset_name=JOBSET), keep_backend=keep
    )
    assert trigger.serialize()[1]["keep_backend"] is keep
    payload = await asyncio.wait_for(_event(trigger), 15)
    assert payload["status"] == "success"
    assert payload.get(BACKEND_KEPT, False) is keep
    assert (waiting.get("jobsets", NS, JOBSET) is not None) is keep
