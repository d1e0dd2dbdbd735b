"""The per-run report: content, TPU-hours and cost arithmetic, no token, the GCS upload."""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest

from tests.support.heldout import GSM8K, MMLU_FELL, heldout, heldout_xcom
from tests.support.run_report import (
    DURATIONS,
    GATE,
    REWARDS,
    RUN_SECONDS,
    build,
    build_report,
    cost,
    layout,
)
from tpu_rl import prices
from tpu_rl.heldout.table import verdict_line
from tpu_rl.names import DAG_ID
from tpu_rl.report import billing, run_cost
from tpu_rl.report import run_report as report
from tpu_rl.report.run_note import note_text
from tpu_rl.settings.run_settings import load_settings

HF_TOKEN = "hf_UnitTestSecretToken0123456789"


def test_a_pool_the_run_creates_bills_for_the_whole_run_so_far(tutorial_conf):
    """The blueprint's pool takes the reservation at a fixed size: it bills idle or not."""
    one = build(tutorial_conf)["tpu"]
    # v6e-32 = 4x8 = 32 chips on ct6e-standard-4t (4 chips a host): 8 hosts, 4 h
    assert one["rule"] == run_cost.CREATED_POOL and "create_cluster" in one["rule_text"]
    assert one["hosts"] == 8 and one["pool_seconds"] == RUN_SECONDS
    assert one["host_hours"] == pytest.approx(32.0)
    # a reservation is paid by its commitment, not by the run
    assert one["estimated_cost_usd"] is None and one["billed_as"] == "commitment"
    assert (one["price"]["mode"], one["price"]["usd_per_chip_hour"]) == ("commit_1y", 1.89)
    assert "paid by its commitment, whether or not the pool exists" in report.cost_text(
        one, "reservation"
    )
    spot = build(tutorial_conf, capacity="spot", reservation="")["tpu"]
    # Spot in us-east5 at the billing catalogue's 1.35 per chip-hour (its snapshots' highest)
    assert spot["estimated_cost_usd"] == pytest.approx(32.0 * 4 * 1.35)
    # the price as the table and the estimate give it: make demo-ui's report, approval and note
    # said "1.22 USD per chip-hour", the estimate "$1.215" (and 1.22 is the 3-year commitment's)
    assert "about $172.80 at 1.35 USD per chip-hour, the spot price" in report.cost_text(
        spot, "spot"
    )
    assert "spot at 1.35 USD per chip-hour" in note_text("succeeded", None, spot, None)
    # two slices as the pools count them (validate refuses a two-slice run: MaxText 0.2.4 cannot
    # mesh it, tpu_rl.settings.cell_rules)
    one = layout(tutorial_conf)
    two_slices = dataclasses.replace(
        one, settings=dataclasses.replace(one.settings, cluster_nodepool_count=2)
    )
    two = build_report(two_slices, REWARDS, GATE, 50, DURATIONS)["tpu"]
    assert two["hosts"] == 16 and two["host_hours"] == pytest.approx(64.0)


def test_an_existing_reserved_pool_bills_the_runs_span(tutorial_conf):
    tpu = build(tutorial_conf, cluster_mode="existing")["tpu"]
    assert tpu["rule"] == run_cost.EXISTING_STATIC_POOL and "run's span" in tpu["rule_text"]
    assert tpu["host_hours"] == pytest.approx(32.0)


def test_without_a_reservation_the_tpu_steps_bill_convert_and_export_included(tutorial_conf):
    tpu = build(tutorial_conf, cluster_mode="existing", reservation="")["tpu"]
    assert tpu["rule"] == run_cost.TPU_NODES and "convert" in tpu["rule_text"]
    # convert 600 + start_backend 300 + train 60 + wait 6840 + export 1200 = 9000 s; not
    # validate, create_cluster, stop_backend or gate, whose pods hold no TPU host
    assert tpu["pool_seconds"] == 9000.0 and tpu["host_hours"] == pytest.approx(20.0)


@pytest.mark.parametrize("cluster_mode", ["create", "existing"])
def test_without_node_records_a_flex_start_pool_bills_its_tpu_steps(tutorial_conf, cluster_mode):
    """Flex-start pools have no TPU node while no pod needs one: the run's span, or the
    cluster's creation, would bill hours no node existed."""
    tpu = build(tutorial_conf, capacity="flex_start", cluster_mode=cluster_mode, reservation="")
    assert tpu["tpu"]["rule"] == run_cost.TPU_NODES and "flex-start" in tpu["tpu"]["rule_text"]
    assert tpu["tpu"]["pool_seconds"] == 9000.0


@pytest.mark.parametrize(
    ("cluster_mode", "rule"),
    [("create", run_cost.CREATED_POOL), ("existing", run_cost.EXISTING_STATIC_POOL)],
)
def test_without_node_records_a_spot_pool_bills_as_the_static_pool_it_is(
    tutorial_conf, cluster_mode, rule
):
    """gcluster gives a Spot TPU pool static_node_count: it bills from deploy to destroy,
    not only while TPU steps run."""
    tpu = build(tutorial_conf, capacity="spot", cluster_mode=cluster_mode, reservation="")["tpu"]
    assert tpu["rule"] == rule and "Spot" in tpu["rule_text"]
    assert tpu["pool_seconds"] == RUN_SECONDS
    assert tpu["price"]["basis"] == "list price" and tpu["price"]["capacity"] == "spot"
    assert tpu["price"]["region"] == "us-east5" and tpu["price"]["usd_per_chip_hour"] == 1.35


def test_node_records_bill_each_nodes_life_tail_included_waits_excluded(tutorial_conf):
    """Two flex-start slices seen by the steps' looks: the first from its creation (after a
    wait with no node) to the first look without it (its scale-down tail included); the second
    still there at the last look, counted to the report."""
    now = time.time()
    start = now - RUN_SECONDS
    first = {f"a{i}": start + 3600 for i in range(8)}  # after an hour's wait without nodes
    second = {f"b{i}": now - 1800 for i in range(8)}
    looks = [
        {"at": start + 60, "nodes": {}},
        {"at": start + 3700, "nodes": first},
        {"at": start + 7200, "nodes": first},  # the conversion's end: still there
        {"at": start + 7800, "nodes": {}},  # scaled down by then (the tail: 600 s)
        {"at": now - 600, "nodes": second},
    ]
    built = build_report(
        layout(tutorial_conf, capacity="flex_start", reservation=""),
        REWARDS, GATE, 50, DURATIONS, looks,
    )  # fmt: skip
    tpu = built["tpu"]
    assert tpu["rule"] == billing.NODE_LIFE and "scale-down tail included" in tpu["rule_text"]
    assert tpu["nodes_seen"] == 16
    assert tpu["host_hours"] == pytest.approx(8 * (4200 + 1800) / 3600, abs=0.01)
    assert "upper bound" in built["summary"] and prices.DWS_PAGE in built["summary"]


# a Spot run preempted at step 62 (last checkpoint 50), resumed after 30 min without capacity
ATTEMPTS = [
    {
        "attempt": 1,
        "started": "2026-03-01T08:10:00+00:00",
        "ended": "2026-03-01T09:10:00+00:00",
        "outcome": "capacity_lost",
        "resumed_from_step": None,
        "reached_step": 62,
        "tpu_hosts": 8,
    },
    {
        "attempt": 2,
        "started": "2026-03-01T09:11:00+00:00",
        "ended": "2026-03-01T10:41:00+00:00",
        "outcome": "completed",
        "resumed_from_step": 50,
        "reached_step": 100,
        "tpu_hosts": 8,
    },
]


def test_each_attempt_shows_its_tpu_node_hours_and_the_steps_the_next_computed_again(
    tutorial_conf,
):
    built = build_report(
        layout(tutorial_conf, capacity="spot", cluster_mode="existing", reservation=""),
        {**REWARDS, "attempts": ATTEMPTS},
        GATE,
        100,
        DURATIONS,
    )
    costs = [(a["tpu_node_hours"], a["steps_recomputed"]) for a in built["attempts"]]
    assert costs == [(pytest.approx(8.0), 12), (pytest.approx(12.0), None)]
    assert built["steps_recomputed"] == 12 and built["capacity"] == "spot"
    assert (
        "resumed 1 time(s) after losing TPU capacity and computed 12 step(s) again"
        in (built["summary"])
    )
    markdown = report.render_markdown(built)
    # attempts recorded before `rung` was: n/a, not an empty cell
    assert "| 1 | n/a | 0 | 62 | capacity_lost | 8 | 8.00 | 12 |" in markdown
    assert "| 2 | n/a | 50 | 100 | completed | 8 | 12.00 | n/a |" in markdown


def test_a_run_without_resumes_reports_one_attempt_and_no_recomputed_steps(tutorial_conf):
    one = [{**ATTEMPTS[1], "attempt": 1, "resumed_from_step": None}]
    built = build_report(layout(tutorial_conf), {**REWARDS, "attempts": one}, GATE, 100, DURATIONS)
    assert built["steps_recomputed"] == 0 and "resumed" not in built["summary"]
    assert built["attempts"][0]["tpu_node_hours"] == pytest.approx(12.0)


def test_missing_steps_count_as_zero_and_unknown_generation_has_no_price(tutorial_conf):
    settings = load_settings(tutorial_conf)
    unpriced = dataclasses.replace(settings, tpu_type="v9x-32")
    assert prices.capacity_price(unpriced.tpu_type, "us-east5", "reservation") is None
    tpu = billing.tpu_billing(unpriced, 8, [], (0.0, 10.0), {}, "now")
    assert tpu["host_hours"] == 0.0 and tpu["estimated_cost_usd"] is None
    partial = build(tutorial_conf, {"train": 3600.0}, cluster_mode="existing", reservation="")
    assert partial["tpu"]["host_hours"] == pytest.approx(8.0)


def test_report_content_and_summary(tutorial_conf):
    run = layout(tutorial_conf)
    built = build_report(run, REWARDS, GATE, 50, DURATIONS)
    assert built["export_uri"] == run.export_dir and built["checkpoint_step"] == 50
    assert built["metrics"] == {"pre": REWARDS["pre"], "post": REWARDS["post"]}
    assert built["gate"] == GATE and built["durations_seconds"] == DURATIONS
    assert built["settings"] == load_settings(tutorial_conf).to_dict()
    summary = built["summary"]
    assert "\n" not in summary
    hours = "128.00 chip-hours = 32.00 host-hours (8 hosts x 4.00 h)"
    for part in ("0.082", "0.123", "+0.041", hours, "paid by its commitment", "step 50"):
        assert part in summary, (part, summary)
    markdown = report.render_markdown(built)
    assert markdown.startswith(f"# Run report: {run.run_id}\n\n{summary}\n")
    assert "| mean_reward | 0.082 | 0.123 |" in markdown
    assert "| wait_for_rewards | 6840.0 |" in markdown


def test_the_token_is_in_neither_file(tutorial_conf, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_HUGGINGFACE_DEFAULT",
        json.dumps({"conn_type": "generic", "password": HF_TOKEN}),
    )
    built = build(tutorial_conf)
    assert "hf_conn_id" not in built["settings"]  # deployment configuration, not the run's
    assert HF_TOKEN not in json.dumps(built) and HF_TOKEN not in report.render_markdown(built)


def test_step_durations_follow_the_dags_order_not_the_alphabet(tutorial_conf):
    """Airflow sends the breadcrumbs sorted by task id; the report lists the steps as they ran,
    a step the DAG does not name last."""
    crumbs = [
        {"task_id": name, "map_index": -1, "duration": 1.0}
        for name in ("cleanup_cluster", "convert", "extra", "train", "validate")
    ]
    order = ["validate", "convert", "train", "cleanup_cluster", "extra"]
    durations = run_cost.step_durations(crumbs, order[:-1])
    markdown = report.render_markdown(build(tutorial_conf, durations))
    rows = markdown.split("## Step durations")[1].splitlines()
    assert [row.split(" | ")[0][2:] for row in rows if row.endswith(" 1.0 |")] == order


def test_without_breadcrumbs_the_report_says_it_has_no_step_durations(tutorial_conf):
    """Airflow 3.1's task instance cannot read the run's durations: said, and counted by age."""
    assert run_cost.finished_step_durations(object(), []) is None
    assert not run_cost.reads_step_durations(object())
    run = layout(tutorial_conf, capacity="flex_start", reservation="")
    built = build_report(run, REWARDS, GATE, 50, None)
    assert built["tpu"]["rule"] == run_cost.TPU_NODES
    assert built["tpu"]["pool_seconds"] == RUN_SECONDS and built["durations_seconds"] is None
    assert built["tpu"]["rule_text"].endswith(run_cost.NO_DURATIONS)
    assert run_cost.NO_DURATIONS in report.render_markdown(built)


def test_publish_uploads_both_files_next_to_the_export(tutorial_conf):
    run = layout(tutorial_conf)
    xcoms = {
        ("wait_for_rewards", "return_value"): REWARDS,
        ("gate", "return_value"): GATE,
        ("export", "checkpoint_step"): 50,
        ("compare_champion", "return_value"): None,  # not run
        ("cleanup_cluster", "tpus_released_at"): None,  # not yet
    }
    ti = mock.Mock(dag_id=DAG_ID, run_id=run.run_id)
    dag_run = mock.Mock(start_date=datetime.now(UTC) - timedelta(hours=2))
    ti.xcom_pull.side_effect = lambda task_ids, key="return_value": (
        [None] * len(task_ids) if key == "tpu_nodes" else xcoms[(task_ids, key)]
    )
    ti.get_task_breadcrumbs.return_value = [
        {"task_id": k, "map_index": -1, "duration": v} for k, v in DURATIONS.items()
    ]
    with mock.patch.object(report, "GCSHook") as hook:
        dag = mock.Mock(task_ids=["convert", "export"])
        context = {"ti": ti, "dag_run": dag_run, "dag": dag}
        uri = report.publish_run_report(run, context, run_cost.count_run_cost(run, context))
    ti.get_task_breadcrumbs.assert_called_with(DAG_ID, run.run_id)
    hook.assert_called_once_with(gcp_conn_id="google_cloud_default")
    uploads = {c.args[1]: c.kwargs for c in hook.return_value.upload.call_args_list}
    prefix = f"gemma4-26b/hf-trained/{run.slug}/"
    assert set(uploads) == {prefix + "run-report.json", prefix + "run-report.md"}
    assert all(c.args[0] == "my-tpu-project-rl" for c in hook.return_value.upload.mock_calls)
    uploaded = json.loads(uploads[prefix + "run-report.json"]["data"])
    assert uri == f"gs://my-tpu-project-rl/{prefix}run-report.md"
    assert uploaded["summary"] in uploads[prefix + "run-report.md"]["data"]
    assert uploaded["checkpoint_step"] == 50
    assert uploads[prefix + "run-report.md"]["mime_type"] == "text/markdown"
    assert uploaded["tpu"]["pool_seconds"] == pytest.approx(7200.0, abs=60)  # the run's age


def test_the_markdown_rounds_its_numbers_and_leaves_no_cell_empty(tutorial_conf):
    """Rewards 3 decimals, other metrics, hours and dollars 2; what the run did not produce is
    n/a; the export has its Cloud console link."""
    rewards = {
        "pre": {"mean_reward": 0.082142857, "accuracy": 12.5, "corr": 8},
        "post": {"mean_reward": 0.123456789},  # no accuracy after training
        "attempts": [{**ATTEMPTS[0], "reached_step": None, "outcome": None}],
    }
    run = layout(tutorial_conf, tpu_type="v6e-32")
    tpu = {**cost(run), "estimated_cost_usd": None, "price": None}
    markdown = report.render_markdown(report.build_report(run, rewards, None, None, DURATIONS, tpu))
    assert "| mean_reward | 0.082 | 0.123 |" in markdown
    assert "| accuracy | 12.50 | n/a |" in markdown and "| corr | 8 | n/a |" in markdown
    assert "| 1 | n/a | 0 | n/a | n/a | 8 | 8.00 | n/a |" in markdown  # 8 hosts x 1 h
    assert "- Checkpoint step: n/a" in markdown
    assert "128.00 chip-hours = 32.00 host-hours (8 hosts x 4.00 h), no price known" in markdown
    assert (
        f"([Cloud console](https://console.cloud.google.com/storage/browser/my-tpu-project-rl/gemma4-26b/hf-trained/{run.slug}/))"
        in markdown
    )
    table_rows = [line for line in markdown.splitlines() if line.startswith("|")]
    assert not [row for row in table_rows if "|  |" in row or "| |" in row]
    assert "None" not in markdown and "TPU-hours" not in markdown


def test_each_attempt_says_where_it_ran_and_why_it_ended_when_it_did_not_complete(
    tutorial_conf,
):
    """A stop at a save before the capacity ended, then the resumed attempt on new nodes."""
    stopped = {**ATTEMPTS[0], "outcome": "stopped_at_save", "reached_step": 50}
    why = "Capacity ends at 2026-03-08T08:10:00+00:00 (nodes n-0); the save of step 50 is the last"
    rows = [{**stopped, "rung": "flex_start@us-east5-b", "why": why},
            {**ATTEMPTS[1], "rung": "flex_start@us-east5-b", "why": None}]  # fmt: skip
    built = build_report(
        layout(tutorial_conf, capacity="flex_start", cluster_mode="existing", reservation=""),
        {**REWARDS, "attempts": rows},
        GATE,
        100,
        DURATIONS,
    )
    markdown = report.render_markdown(built)
    assert "| 1 | flex_start@us-east5-b | 0 | 50 | stopped_at_save | 8 |" in markdown
    assert f"- attempt 1 ended: {why}" in markdown
    assert "- attempt 2 ended" not in markdown


def test_a_held_out_evaluation_is_kept_summed_up_and_tabled_only_when_the_run_had_one(
    tutorial_conf,
):
    run, held = layout(tutorial_conf), heldout(GSM8K, MMLU_FELL)
    tpu = cost(run)
    built = report.build_report(run, REWARDS, GATE, 100, DURATIONS, tpu, heldout=held)
    assert built["heldout"] == held.as_dict()
    assert json.loads(json.dumps(built))["heldout"] == heldout_xcom(GSM8K, MMLU_FELL)
    assert built["summary"].endswith(f" {verdict_line(held)}.")
    markdown = report.render_markdown(built)
    section = markdown.index("## Held-out benchmarks")
    assert markdown.index("## Metrics") < section < markdown.index("## Cost")
    assert "| mmlu (guard) | 500 | 62.0% | 62.0% | 68.0% | +0.0 (-1.8 to +1.8) |" in markdown
    assert "Level 95% (McNemar's exact test, p < 0.05)." in markdown
    plain = report.build_report(run, REWARDS, GATE, 100, DURATIONS, tpu)
    assert "heldout" not in plain and "Held-out" not in report.render_markdown(plain)
    assert report.build_report(run, REWARDS, GATE, 100, DURATIONS, tpu, heldout=None) == plain


def test_publish_puts_the_held_out_evaluation_it_is_given_in_the_report(tutorial_conf):
    run, held = layout(tutorial_conf), heldout(GSM8K)
    ti = mock.Mock(dag_id=DAG_ID, run_id=run.run_id)
    ti.xcom_pull.return_value = None
    ti.get_task_breadcrumbs.return_value = []
    context = {"ti": ti, "dag": mock.Mock(task_ids=[])}
    with mock.patch.object(report, "write_report", return_value=["r.json", "r.md"]) as write:
        assert report.publish_run_report(run, context, cost(run), held) == "r.md"
    assert write.call_args.args[0]["heldout"] == held.as_dict()
