"""Failure notifications, through Airflow's own task runner, to a local SMTP and HTTP sink.

A two-task DAG (the reward wait and the real gate operator) runs with `dag.test()`; the gate's
failure callback is the product's notifier, configured only by environment: an SMTP connection
and a webhook connection, as a deployer would set them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from sandbox.cloud import free_port
from tpu_rl.report.failures import first_line
from tpu_rl.report.notify import FAILURE_XCOM_KEY, RunFailureNotifier


class SmtpSink:
    """aiosmtpd's handler interface: keeps every message it is sent."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server, session, envelope) -> str:
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"


@pytest.fixture
def smtp_sink() -> Iterator[tuple[SmtpSink, int]]:
    sink, port = SmtpSink(), free_port()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield sink, port
    finally:
        controller.stop()


@pytest.fixture
def http_sink() -> Iterator[tuple[list[dict], int]]:
    bodies: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield bodies, server.server_port
    finally:
        server.shutdown()


DAG_FILE = """
from datetime import datetime

from airflow.sdk import DAG, BaseOperator

from tpu_rl.report.notify import RunFailureNotifier
from tpu_rl.promotion.gate import reward_gate


class Rewards(BaseOperator):
    def execute(self, context):
        post = context["params"]["post_mean_reward"]
        return {"pre": {"mean_reward": 0.0821}, "post": {"mean_reward": post}}


# the gate's rule and message: RewardGateOperator also reads the run's settings and its
# committed checkpoints from the bucket, which this DAG has neither of
class Gate(BaseOperator):
    template_fields = ("rewards",)

    def __init__(self, rewards, **kwargs):
        super().__init__(**kwargs)
        self.rewards = rewards

    def execute(self, context):
        return reward_gate(self.rewards, context["params"]["min_reward_gain"])


with DAG(
    "notify_test",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    params={"min_reward_gain": 0.0, "post_mean_reward": 0.0},
    default_args={"on_failure_callback": RunFailureNotifier()},
):
    rewards = Rewards(task_id="wait_for_rewards")
    Gate(task_id="gate", rewards=rewards.output, retries=0)
"""


@pytest.fixture
def gate_dag(tmp_path, monkeypatch):
    """A reward wait and the real gate, in a DAG folder of their own (dag.test needs a bundle)."""
    from sandbox.dagbags import DagBag

    (tmp_path / "notify_test.py").write_text(DAG_FILE)
    bundle = {
        "name": "notify-test",
        "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
        "kwargs": {"path": str(tmp_path)},
    }
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps([bundle]))
    bag = DagBag(str(tmp_path))
    assert not bag.import_errors, bag.import_errors
    return bag.dags["notify_test"]


def configure(monkeypatch, smtp_port: int, http_port: int) -> None:
    """What a deployer sets: two connections and three [tpu_rl] options."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_NOTIFY_SMTP",
        json.dumps(
            {
                "conn_type": "smtp",
                "host": "127.0.0.1",
                "port": smtp_port,
                "extra": {
                    "from_email": "airflow@example.com",
                    "disable_tls": True,
                    "disable_ssl": True,
                },
            }
        ),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_CHAT_WEBHOOK",
        json.dumps({"conn_type": "http", "host": f"http://127.0.0.1:{http_port}/webhook"}),
    )
    monkeypatch.setenv(
        "AIRFLOW__TPU_RL__NOTIFY_EMAIL_TO", "ml-team@example.com, oncall@example.com"
    )
    monkeypatch.setenv("AIRFLOW__TPU_RL__NOTIFY_SMTP_CONN_ID", "notify_smtp")
    monkeypatch.setenv("AIRFLOW__TPU_RL__NOTIFY_WEBHOOK_CONN_ID", "chat_webhook")


def test_a_gate_stop_is_mailed_and_posted_with_the_reason_and_rewards(
    airflow_db, gate_dag, smtp_sink, http_sink, monkeypatch
):
    (sink, smtp_port), (bodies, http_port) = smtp_sink, http_sink
    configure(monkeypatch, smtp_port, http_port)
    run = gate_dag.test(run_conf={"post_mean_reward": -0.05})
    assert str(run.state) == "failed"

    [mail] = sink.messages
    assert mail["Subject"] == f"[notify_test] reward gate stopped the export: {run.run_id}"
    assert mail["From"] == "airflow@example.com"
    assert "ml-team@example.com" in mail["To"] and "oncall@example.com" in mail["To"]
    [body] = [
        p.get_payload(decode=True).decode()
        for p in mail.walk()
        if p.get_content_maintype() == "text"
    ]
    assert "task: gate" in body
    assert "reason: reward gate: post-training mean_reward=-0.0500 is below" in body
    assert "rewards: mean_reward pre 0.0821 -&gt; post -0.0500 (gain -0.1321)" in body

    [posted] = bodies
    lines = posted["text"].splitlines()
    assert lines[0] == mail["Subject"]
    # the webhook gets the text with Slack's escaping of & < > (tpu_rl.report.failures.chat_text)
    assert "rewards: mean_reward pre 0.0821 -&gt; post -0.0500 (gain -0.1321)" in lines
    assert lines[-1].startswith("details: http") and "/runs/" in lines[-1]

    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        recorded = (
            session.query(XComModel)
            .filter_by(dag_id="notify_test", run_id=run.run_id, key=FAILURE_XCOM_KEY)
            .one()
        )
    assert recorded.task_id == "gate"
    assert str(recorded.value).startswith("reward gate: post-training mean_reward=-0.0500")


def test_a_successful_run_tells_no_one(airflow_db, gate_dag, smtp_sink, http_sink, monkeypatch):
    (sink, smtp_port), (bodies, http_port) = smtp_sink, http_sink
    configure(monkeypatch, smtp_port, http_port)
    assert str(gate_dag.test(run_conf={"post_mean_reward": 0.2}).state) == "success"
    assert sink.messages == [] and bodies == []


def test_a_channel_that_cannot_be_reached_does_not_hide_the_failure(
    airflow_db, gate_dag, http_sink, monkeypatch
):
    bodies, http_port = http_sink
    configure(monkeypatch, free_port(), http_port)  # nothing listens on the SMTP port
    run = gate_dag.test(run_conf={"post_mean_reward": -0.05})
    assert str(run.state) == "failed"
    assert len(bodies) == 1  # the webhook still got it


def test_first_line_of_an_error():
    assert first_line(RuntimeError("\n  Job failed: BackoffLimitExceeded\n  at ...")) == (
        "Job failed: BackoffLimitExceeded"
    )
    assert first_line(RuntimeError()) == "RuntimeError"
    assert first_line(
        RuntimeError("2 invalid setting(s):\n- project: required, and empty\n- x")
    ) == ("2 invalid setting(s): project: required, and empty; x")
    assert first_line(None) == "no error message"


def test_the_dag_tells_why_the_gate_stopped_and_links_the_console(
    airflow_db, smtp_sink, http_sink, monkeypatch, tmp_path
):
    """The real DAG in the sandbox: the gate stops the export; one mail, one post, the links."""
    from sandbox.harness import SETTINGS, Sandbox, Workloads
    from sandbox.workloads import EvalResult

    (sink, smtp_port), (bodies, http_port) = smtp_sink, http_sink
    configure(monkeypatch, smtp_port, http_port)
    with Sandbox(tmp_path).up() as box:
        result = box.run(dict(SETTINGS), Workloads(post=EvalResult(corr=5, mean_reward=-0.05)))
    assert result.state == "failed" and result.task_states["gate"] == "failed"

    [mail] = sink.messages  # the gate's failure only: upstream_failed tasks run no callback
    assert (
        mail["Subject"] == f"[tpu_rl_post_training] reward gate stopped the export: {result.run_id}"
    )
    [posted] = bodies
    assert "rewards: mean_reward pre 0.0821 -&gt; post -0.0500 (gain -0.1321)" in posted["text"]
    assert result.xcoms["gate.failure"].startswith("reward gate: post-training mean_reward=-0.0500")

    project, cluster = SETTINGS["project"], SETTINGS["cluster_name"]
    workloads = result.xcoms["start_backend._link_GkeWorkloadsLink"]
    assert workloads.startswith("https://console.cloud.google.com/kubernetes/workload/overview")
    assert f"gke%2F{SETTINGS['region']}%2F{cluster}" in workloads
    train_job = result.xcoms["train.job_name"]  # what the provider created, as it pushed it
    assert result.xcoms["train._link_KubernetesJobLink"] == (
        f"https://console.cloud.google.com/kubernetes/job/{SETTINGS['region']}/{cluster}/"
        f"{SETTINGS.get('namespace', 'default')}/{train_job}/details?project={project}"
    )
    logs = result.xcoms["wait_for_rewards._link_PodLogsLink"]
    assert f"k8s-pod%2Fjob-name%22%3D%22{train_job}%22" in logs and f"project={project}" in logs
    checkpoints = result.xcoms["gate._link_CheckpointsLink"]
    assert checkpoints.startswith(
        f"https://console.cloud.google.com/storage/browser/{SETTINGS['gcs_bucket']}/gemma4-26b/trained/rl-"
    )
    assert "verify._link_ExportLink" not in result.xcoms  # upstream_failed: it never ran


def test_the_dags_callback_speaks_only_when_no_task_did(http_sink, monkeypatch):
    """The DAG's failure callback (the DAG processor's minimal context): a timeout is told."""
    bodies, http_port = http_sink
    configure(monkeypatch, free_port(), http_port)
    monkeypatch.delenv("AIRFLOW__TPU_RL__NOTIFY_EMAIL_TO")
    dag = SimpleNamespace(dag_id="tpu_rl_post_training")
    context = {"dag": dag, "run_id": "scheduled__2026-12-01", "reason": "task_failure"}
    RunFailureNotifier().notify(context)
    assert bodies == []  # the failed task's own callback told it
    RunFailureNotifier().notify({**context, "reason": "timed_out"})
    [posted] = bodies
    lines = posted["text"].splitlines()
    assert lines[0] == "[tpu_rl_post_training] run failed: scheduled__2026-12-01"
    assert "reason: the run ended: timed_out" in lines
    assert lines[-1].endswith("/dags/tpu_rl_post_training/runs/scheduled__2026-12-01")


@pytest.fixture
def silent_server() -> Iterator[tuple[list[str], int]]:
    """A TCP port that accepts connections and never answers (an SMTP server or webhook that
    hangs); records each connection."""
    import socket

    accepted: list[str] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)
            accepted.append("connection")

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield accepted, listener.getsockname()[1]
    finally:
        listener.close()
        for conn in held:
            conn.close()


def test_a_channel_that_never_answers_is_tried_twice_and_logged_not_waited_for(
    silent_server, monkeypatch, caplog
):
    from tpu_rl.report import failures
    from tpu_rl.report.notices import send_notices

    accepted, port = silent_server
    monkeypatch.setattr(failures, "NOTICE_TIMEOUT_SECONDS", 0.5)
    monkeypatch.setattr("tpu_rl.report.notices.NOTICE_TIMEOUT_SECONDS", 0.5)
    configure(monkeypatch, port, port)  # both channels: the silent server
    failure = failures.RunFailure("d", "r", "gate", "reward gate: stop", "none", "http://x")
    import logging

    failed = send_notices(failures.channels(failure), {}, logging.getLogger("notice-test"))
    http, smtp = sorted(failed)
    assert http.startswith("HttpNotifier: ") and "timed out" in http  # its requests timeout
    assert smtp == "SmtpNotifier: no answer within 0.5 s"  # the try's deadline
    assert len(accepted) >= 3  # each channel connected, and each was tried again
    assert "tried 2 times" in caplog.text


def callback_context(task_id: str, push: Callable = lambda *a, **kw: None, **extra: Any) -> dict:
    """A task's failure-callback context, as much of it as the notifier reads (`extra`: the
    worker's `exception`, which the DAG processor's context lacks); `push` takes its XComs."""
    ti = SimpleNamespace(task_id=task_id, xcom_pull=lambda **kw: None, xcom_push=push, log_url="u")
    return {"dag": SimpleNamespace(dag_id="d"), "run_id": "r", "ti": ti, **extra}


def test_chat_markup_from_a_setting_reaches_the_webhook_as_text(http_sink, monkeypatch):
    bodies, http_port = http_sink
    configure(monkeypatch, free_port(), http_port)
    monkeypatch.delenv("AIRFLOW__TPU_RL__NOTIFY_EMAIL_TO")
    error = ValueError("cluster_name '<!channel> <https://evil.example|docs> & co' is invalid")
    RunFailureNotifier().notify(callback_context("validate", exception=error))
    [posted] = bodies
    assert "&lt;!channel&gt; &lt;https://evil.example|docs&gt; &amp; co" in posted["text"]
    assert "<!channel>" not in posted["text"] and "<https://" not in posted["text"]


def test_the_token_cut_by_a_wrap_is_masked_in_the_notice(http_sink, monkeypatch):
    """A failure callback's worker never read the token: the notifier registers it, so the
    notice masks it without its prefix and cut by a line wrap."""
    token = "hf_NoticeSide0123456789WrapMeAcross"
    body = token.removeprefix("hf_")
    bodies, http_port = http_sink
    configure(monkeypatch, free_port(), http_port)
    monkeypatch.delenv("AIRFLOW__TPU_RL__NOTIFY_EMAIL_TO")
    monkeypatch.setenv(
        "AIRFLOW_CONN_HF_NOTICESIDE", json.dumps({"conn_type": "http", "password": token})
    )
    monkeypatch.setenv("TPU_RL_HF_CONN_ID", "hf_noticeside")
    # "...:" brings the next line into the reason (first_line): both pieces reach the notice
    error = RuntimeError(f"401 from huggingface.co with {body[:12]}:\n{body[12:]}\nat ...")
    RunFailureNotifier().notify(callback_context("convert", exception=error))
    [posted] = bodies
    assert "401 from huggingface.co with" in posted["text"]
    assert body[:12] not in posted["text"] and body[12:] not in posted["text"]


def test_a_failure_the_scheduler_found_is_told_from_the_dag_processor(http_sink, monkeypatch):
    """A worker killed on the task's last try: the scheduler has the DAG processor run the
    task's failure callback (airflow/dag_processing/processor.py, _execute_task_callbacks),
    with no exception in the context. That process's supervisor reads no XCom write, and never
    answers one (it logs "Unable to decode message"); the notice must still go out."""
    from airflow.dag_processing.processor import DagFileProcessorProcess
    from airflow.sdk.execution_time.comms import SetXCom

    def push_from_the_dag_processor(key: str, value: object) -> None:
        message = SetXCom(key=key, value=value, dag_id="d", run_id="r", task_id="train")
        DagFileProcessorProcess.decoder.validate_python(message.model_dump())  # raises

    bodies, http_port = http_sink
    configure(monkeypatch, free_port(), http_port)
    monkeypatch.delenv("AIRFLOW__TPU_RL__NOTIFY_EMAIL_TO")
    RunFailureNotifier().notify(callback_context("train", push=push_from_the_dag_processor))
    [posted] = bodies
    assert "train failed" in posted["text"], posted["text"]
    assert "killed, or its heartbeat timed out" in posted["text"], posted["text"]
