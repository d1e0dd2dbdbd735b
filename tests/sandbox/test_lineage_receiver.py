"""The loopback OpenLineage backend: it keeps what the real client's HTTP transport posts, in
order, and refuses what Marquez refuses (a body that is not a JSON object: 400; another path:
404), so a sender that is not the real client with its real serialisation fails."""

from __future__ import annotations

import uuid

import requests
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.transport.http import HttpConfig, HttpTransport

from sandbox.lineage_receiver import ENDPOINT, lineage_receiver


def test_the_clients_http_transport_posts_events_it_keeps_in_order():
    with lineage_receiver() as receiver:
        config = HttpConfig.from_dict(receiver.transport())
        client = OpenLineageClient(transport=HttpTransport(config))
        run_id = str(uuid.uuid4())
        for state in (RunState.START, RunState.COMPLETE):
            client.emit(
                RunEvent(
                    eventType=state,
                    eventTime="2026-12-07T08:00:00+00:00",
                    run=Run(runId=run_id),
                    job=Job(namespace="tpu-rl-sandbox", name="tpu_rl_post_training.export"),
                )
            )
        events = receiver.events()
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    assert {e["run"]["runId"] for e in events} == {run_id}


def test_what_marquez_refuses_is_refused():
    with lineage_receiver() as receiver:
        url = receiver.url + ENDPOINT
        assert requests.post(url, data=b"not json", timeout=5).status_code == 400
        assert requests.post(url, json=[1, 2], timeout=5).status_code == 400
        assert requests.post(receiver.url + "/api/v1/other", json={}, timeout=5).status_code == 404
        assert receiver.events() == []
