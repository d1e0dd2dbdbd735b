"""Capacity as GKE really gives it (issue 26): deadlines that start when the work starts, Spot
as the static pool gcluster renders, TPU-hours and cost as billed.

Checked against main's product code (plugins/ as on main, these tests and the sandbox as here):
see each test's docstring for how it failed there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.e2e.test_strict_cloud import reported_run
from tests.sandbox.harness import FLEX, RunResult, Sandbox, Workloads

SLICE_ARRIVES_S = 200 * 60.0  # simulated: the flex-start slice comes 200 minutes after the ask


@dataclass
class Case:
    name: str
    expected: str
    workloads: Workloads = field(default_factory=Workloads)


def job_failures(result: RunResult) -> dict[str, str]:
    """Job name -> the reason of its Failed condition, for every failed Job."""
    return {
        job["metadata"]["name"]: condition.get("reason", "")
        for job in result.emu.list("jobs")
        for condition in (job.get("status") or {}).get("conditions") or []
        if condition["type"] == "Failed" and condition["status"] == "True"
    }


def test_flex_start_slice_after_200_minutes_converts_within_a_180_minute_limit(
    airflow_db, tmp_path, capfd, e2e_report
):
    """The conversion Job waits 200 simulated minutes for its slice (pending_timeout 240, as in
    include/examples/flex-start.json) and then converts within its 180-minute limit.

    On main the Job's activeDeadlineSeconds was the 180 minutes alone, counted from Kueue's
    admission: the Job failed DeadlineExceeded while its pods were still Pending, `convert`
    failed and the run with it."""
    case = Case("flex_start_slice_after_200_minutes", "success",
                Workloads(provisioning_delay_s=SLICE_ARRIVES_S))  # fmt: skip
    conf: dict[str, Any] = {
        **FLEX,
        "num_batches": 50,
        "pending_timeout_minutes": 240,
        "conversion_timeout_minutes": 180,
    }
    with Sandbox(tmp_path).up() as box:
        result, _ = reported_run(box, case, conf, capfd, e2e_report)
    assert result.task_states["convert"] == "success", result.task_states
    assert job_failures(result) == {}
    first_tpu_node = min(n.started for n in result.ledger.nodes if n.tpu)
    assert first_tpu_node >= SLICE_ARRIVES_S  # the wait really was 200 minutes long
