"""RewardTrigger rebuilt from the kwargs Airflow stored with a deferred task: a version before
the follow parameters' bundle (tpu_rl.watch.rules.WatchRules) stored them one by one, and a
triggerer upgraded mid-run must rebuild that trigger with the same rules."""

from __future__ import annotations

import json

from tpu_rl.rewards.trigger import RewardTrigger

BEFORE_THE_BUNDLE = {  # sensor.follow_args at 2da6afb, as the trigger serialized them
    "cluster_url": "https://10.0.0.1",
    "ssl_ca_cert": "Q0E=",
    "gcp_conn_id": "google_cloud_default",
    "impersonation_chain": None,
    "use_dns_endpoint": False,
    "namespace": "default",
    "job_name": "train",
    "deadline": 1_900_000_000.0,
    "container_name": None,
    "backend_jobset_name": "backend",
    "pending_timeout": 600.0,
    "checkpoint_period": 25,
    "total_steps": 200,
    "capacity_ends_at": 1_800_000_000.0,
    "spend": {"capacity": "spot", "billed_as": "usage", "usd_per_hour": 40.0, "max_usd": 90.0},
    "health_rules": {"stall_factor": 0.0, "action": "resume"},
    "tensorboard_dir": None,
    "tensorboard_every_s": 30.0,
    "progress_every_s": 300.0,
    "poll_interval": 30.0,
    "keep_backend": False,
    "state": None,
}


def test_a_trigger_serialized_before_the_bundle_keeps_its_rules():
    trigger = RewardTrigger(**BEFORE_THE_BUNDLE)
    watch = trigger.follower.watch
    assert (watch.checkpoint_period, watch.total_steps) == (25, 200)
    assert watch.capacity_ends_at == 1_800_000_000.0 and watch.progress_every_s == 300.0
    assert (watch.spend.max_usd, watch.spend.usd_per_hour) == (90.0, 40.0)
    assert (watch.health.stall_factor, watch.health.action) == (0.0, "resume")
    assert watch.health.spike_factor == 10.0  # a rule it did not name: the settings' default
    _, kwargs = trigger.serialize()
    assert "health_rules" not in kwargs and "total_steps" not in kwargs
    again = RewardTrigger(**json.loads(json.dumps(kwargs))).follower.watch
    assert again == watch
