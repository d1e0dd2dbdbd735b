"""The run's note, on the run's own page in Airflow: its verdict, held-out benchmarks, rewards
and cost.

`outcome` writes it. Airflow 3.3's Task SDK gives a task no way to set its run's note (the
execution API's dag-runs routes read a run, trigger, clear and count runs:
airflow/api_fastapi/execution_api/routes/dag_runs.py; a note is taken only when triggering a new
run, TriggerDAGRunPayload.note), so the note goes through the public REST API of the api-server
(`PATCH /api/v2/dags/{dag_id}/dagRuns/{dag_run_id}` with `update_mask=note`:
airflow/api_fastapi/core_api/routes/public/dag_run.py, patch_dag_run) as the deployment's
Airflow API connection (tpu_rl.deployment.airflow_api_conn_id) allows. Without that connection,
or when the API refuses, the note is only logged: the run's result never depends on it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from tpu_rl.heldout.table import benchmark_lines, benchmark_table, verdict_line
from tpu_rl.layout import console_object_url
from tpu_rl.names import UI_PREFIX
from tpu_rl.report.billing import billed_text

if TYPE_CHECKING:
    from tpu_rl.heldout.report import HeldoutReport

log = logging.getLogger(__name__)

NOTE_LIMIT = 1000  # DAGRunPatchBody.note's max_length (core_api/datamodels/dag_run.py)
TOKEN_PATH = "/auth/token"  # the simple and FAB auth managers' token endpoint (POST, JSON)
# The RL post-training page's route in the UI's navigation (tpu_rl.airflow_plugin): Airflow 3's UI
# shows an external view with a url_route at plugin/<url_route> (the installed bundle
# airflow/ui/dist/assets/index-*.js: `function Uct(e){return`plugin/${e.url_route}`}`).
RL_PAGE_ROUTE = "rl-post-training"
RL_PAGE = f"/plugin/{RL_PAGE_ROUTE}"
RL_PAGE_LINE = f"All runs: [RL post-training page]({RL_PAGE})"
# The run's report as a page of the UI plugin (tpu_rl.ui.app, GET /report/{run_id}): it opens
# wherever Airflow does, unlike the Cloud Console page of the demo's sandbox bucket or a file://
# link (which browsers do not follow from an http page). The note's links open in a new tab:
# Airflow's Markdown renders a link as chakra's Link with that href and target "_blank" (the
# installed bundle airflow/ui/dist/assets/index-*.js: `{color:`fg.info`,...,href:r,rel:
# `noopener noreferrer`,target:`_blank`}`), so an api-server path outside the React app opens.
REPORT_ROUTE = f"{UI_PREFIX}/report/"
REPORT_ELSEWHERE = "Report: on the RL post-training page"  # when no link fits the note
STOPPED_CUT = " (cut: the report has it whole)"  # an early stop's line cut to fit the note
TIMEOUT_S = 30.0  # per call; outcome has 10 minutes (STEP_MINUTES)


def note_text(
    verdict: str,
    rewards: Mapping[str, Any] | None,
    tpu: Mapping[str, Any] | None,
    report_uri: str | None,
    promotion: str | None = None,
    run_id: str | None = None,
    heldout: HeldoutReport | None = None,
) -> str:
    """The note: the verdict, the promotion (if the export was verified), the held-out
    benchmarks (with `heldout`), why training stopped early (if it did), mean_reward pre ->
    post, the cost and the report's place: its page in Airflow (with `run_id`), then the
    object's own. What does not fit gives way in that order: the early stop's evidence, then its
    details, then the report's longer links; the held-out table gives way to a line per
    benchmark, then to the verdict alone, before each of them. Its sentences are never cut
    while the shortest fits."""
    pre, post = ((rewards or {}).get(k) or {} for k in ("pre", "post"))
    before, after = pre.get("mean_reward"), post.get("mean_reward")
    if before is None or after is None:
        reward = f"mean_reward {_reward(before)} -> {_reward(after)}"
    else:
        reward = f"mean_reward {before:.3f} -> {after:.3f} ({after - before:+.3f})"
    head = [
        f"**{verdict}** {next_step(verdict)}",
        *([f"Promotion: {promotion}"] if promotion else []),
    ]
    tail = [reward, f"TPU cost: {_cost(tpu)}"]
    reports = [*_report_lines(report_uri, run_id), REPORT_ELSEWHERE] if report_uri else [""]
    stops = training_stopped(rewards) or [""]
    benchmarks = heldout_texts(heldout) or [""]

    def note(stop: str, report: str, held: str) -> str:
        return "\n\n".join(p for p in [*head, held, stop, *tail, report, RL_PAGE_LINE] if p)

    for stop, report, held in itertools.product(stops, reports, benchmarks):
        if len(text := note(stop, report, held)) <= NOTE_LIMIT:
            return text
    # nothing fits whole: the shortest early stop line cut to the room left
    room = NOTE_LIMIT - len(note("", reports[-1], benchmarks[-1])) - 2
    cut = stops[-1][: room - len(STOPPED_CUT)] + STOPPED_CUT if room > len(STOPPED_CUT) else ""
    return note(cut if stops[-1] else "", reports[-1], benchmarks[-1])[:NOTE_LIMIT]


def heldout_texts(report: HeldoutReport | None) -> list[str]:
    """The note's held-out paragraph, longest first: the verdict with the table per benchmark,
    with a line per benchmark, alone; none without held-out evaluation."""
    if report is None:
        return []
    verdict = verdict_line(report)
    return [
        "\n".join([f"{verdict}:", "", *benchmark_table(report)]),
        "\n".join([f"{verdict}:", *(f"- {line}" for line in benchmark_lines(report))]),
        verdict,
    ]


def next_step(verdict: str) -> str:
    """What to do after the run, on the note's first line (all that Airflow shows of a note
    until its pencil icon is pressed)."""
    if verdict.startswith("failed"):
        return "Next: fix what it names (the failed task's log has the whole error), trigger again."
    return "Next: the report below has the rewards, the cost and where the model is."


def training_stopped(rewards: Mapping[str, Any] | None) -> list[str]:
    """Why an exported run's training stopped early, longest wording first; none if it did not."""
    from tpu_rl.watch.health import describe, next_step

    found = rewards or {}
    if anomaly := found.get("anomaly"):
        kept = f"Training stopped early; kept and exported: {anomaly.get('healthy_checkpoint')}."
        advice = next_step(anomaly)
        rule = f"Training health: {anomaly['rule']} at step {anomaly['step']} (the report has why)"
        return [
            *(f"{kept} {describe(anomaly, evidence=e)}. {advice}" for e in (True, False)),
            f"{kept} {rule}. {advice}",
        ]
    if stop := found.get("spend_stop"):
        return [f"Training stopped early. {stop.get('message') or 'spend limit'}"]
    return []


def report_page(run_id: str) -> str:
    """The path of the run's report page in Airflow (tpu_rl.ui.app serves it)."""
    return REPORT_ROUTE + quote(run_id, safe="")


def _report_lines(report_uri: str, run_id: str | None) -> list[str]:
    """The note's report line, longest first: the page and the object, then each alone."""
    stored = f"[{report_uri}]({report_link(report_uri)})"
    if not run_id:
        return [f"Report: {stored}"]
    page = f"[open]({report_page(run_id)})"
    return [f"Report: {page} · {stored}", f"Report: {page}", f"Report: {stored}"]


def report_link(uri: str) -> str:
    """Where a person opens the report: a `gs://` object's page in the Cloud Console, a local
    file (the demo keeps reports under .airflow/reports/) as a file URL."""
    if uri.startswith("gs://"):
        return console_object_url(uri)
    return Path(uri).absolute().as_uri()


def _reward(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _cost(tpu: Mapping[str, Any] | None) -> str:
    if not tpu:
        return "not counted"
    hours = f"{tpu['chip_hours']:.2f} chip-hours, {tpu['host_hours']:.2f} host-hours"
    price = tpu.get("price")
    if billed := billed_text(tpu):  # a reservation's commitment, a calendar window
        return f"{hours}; {billed}"
    if tpu.get("estimated_cost_usd") is None or not price:
        return f"{hours}, no price known"
    return (
        f"${tpu['estimated_cost_usd']:,.2f} ({hours}; {price['capacity']} at "
        f"{price['usd_per_chip_hour']:g} USD per chip-hour, {price['basis']})"
    )


def set_run_note(conn_id: str, dag_id: str, run_id: str, text: str) -> bool:
    """Set the run's note through the api-server's REST API as connection `conn_id` (its host:
    the API's base URL; login and password: a user's, or no login and a bearer token as the
    password). False, with the reason logged, when it could not."""
    path = f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}"
    return _patch_note(conn_id, path, "The run's note", text)


def set_task_note(conn_id: str, dag_id: str, run_id: str, task_id: str, text: str) -> bool:
    """Set a task instance's note (PATCH .../taskInstances/{task_id}, update_mask=note)."""
    run = f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}"
    path = f"{run}/taskInstances/{quote(task_id, safe='')}"
    return _patch_note(conn_id, path, f"{task_id}'s note", text)


def _patch_note(conn_id: str, path: str, what: str, text: str) -> bool:
    """PATCH the note of the run or task instance at `path`; False, the reason logged, if not."""
    import httpx
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as err:  # AirflowNotFoundException, or the secrets backend's own
        log.info("%s is not set (connection %r: %s). It reads:\n%s", what, conn_id, err, text)
        return False
    base = (conn.host or "").rstrip("/")
    base = base if "://" in base else f"http://{base}"
    base = f"{base}:{conn.port}" if conn.port else base
    try:
        with httpx.Client(base_url=base, timeout=TIMEOUT_S) as client:
            token = conn.password or ""
            if conn.login:
                answer = client.post(
                    TOKEN_PATH, json={"username": conn.login, "password": conn.password}
                )
                answer.raise_for_status()
                token = answer.json()["access_token"]
            client.patch(
                path,
                params={"update_mask": "note"},
                json={"note": text},
                headers={"Authorization": f"Bearer {token}"},
            ).raise_for_status()
    except (httpx.HTTPError, KeyError, ValueError) as err:
        log.warning("%s is not set (%s %s): %s", what, conn_id, base, err)
        return False
    log.info("%s:\n%s", what, text)
    return True
