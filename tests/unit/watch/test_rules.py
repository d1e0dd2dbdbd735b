"""The watch's rules for one attempt (tpu_rl.watch.rules): JSON in the trigger's kwargs and back."""

from __future__ import annotations

import json

from tpu_rl.watch.health import Rules
from tpu_rl.watch.progress import Spend
from tpu_rl.watch.rules import WatchRules


def test_the_rules_come_back_from_their_json_as_they_were():
    rules = WatchRules(
        checkpoint_period=25,
        total_steps=500,
        capacity_ends_at=1_800_000_000.0,
        progress_every_s=60.0,
    )
    data = json.loads(json.dumps(rules.as_dict()))
    assert WatchRules.from_dict(data) == rules
    assert data["checkpoint_period"] == 25 and data["spend"] == Spend().as_dict()


def test_what_the_json_lacks_is_the_default():
    assert WatchRules.from_dict(None) == WatchRules()
    partial = WatchRules.from_dict({"total_steps": 8, "unknown": 1})
    assert partial.total_steps == 8 and partial.checkpoint_period == 0
    assert partial.health == Rules.defaults() and partial.progress_every_s == 900.0
