"""How the reward wait ends (tpu_rl.watch.ends): the reasons' table and the error event."""

from __future__ import annotations

import json

from tpu_rl.watch.ends import CAPACITY_SUSPECTS, FINAL, STOPS_TRAINING, WaitEnd, error_event


def test_an_error_event_is_json_with_the_reason_as_its_plain_string():
    event = error_event(WaitEnd.POD_FAILED, "pod x failed")
    assert event == {"status": "error", "reason": "pod_failed", "message": "pod x failed"}
    assert type(event["reason"]) is str
    assert json.loads(json.dumps(event)) == event


def test_an_error_events_message_is_masked():
    event = error_event("job_failed", "login failed: token=s3cr3t-value for hf_abcdefgh1234")
    assert "s3cr3t-value" not in event["message"] and "hf_abcdefgh1234" not in event["message"]
    assert event["message"].startswith("login failed: token=***")


def test_a_stop_the_wait_made_is_final_and_the_retriable_ends_are_not():
    assert STOPS_TRAINING <= FINAL
    assert CAPACITY_SUSPECTS <= FINAL
    assert {WaitEnd.TIMEOUT, WaitEnd.UNSCHEDULABLE, WaitEnd.API_ERROR}.isdisjoint(FINAL)
