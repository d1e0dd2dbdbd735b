"""The champion record on the GCS emulator: a write over a record read before another promotion
is refused (412, as Cloud Storage refuses it: the read's generation comes from the download's
`x-goog-generation` header), and a corrupt record is named with its fix."""

from __future__ import annotations

import pytest
from google.api_core.exceptions import PreconditionFailed

from tpu_rl.promotion.champion import ChampionRecord, ChampionStore

RECORD = ChampionRecord(
    run_id="run-1",
    export_uri="gs://bucket/gemma4-26b/hf-trained/rl-1/",
    checkpoint_uri="gs://bucket/gemma4-26b/trained/rl-1/checkpoints/actor/50/",
    step=50,
    metrics={"mean_reward": 0.2},
    promoted_at="2026-11-26T08:00:00+00:00",
)


def test_a_write_over_a_record_promoted_since_the_read_is_refused(gcs):
    stale, fresh = (ChampionStore("gs://bucket/gemma4-26b", "prod", "c") for _ in range(2))
    assert stale.read() is None and stale.generation == 0
    stale.write(RECORD)
    assert fresh.read() == RECORD and fresh.generation == stale.generation > 0
    fresh.write(RECORD.__class__(**{**RECORD.as_dict(), "run_id": "run-2"}))
    with pytest.raises(PreconditionFailed):  # stale's generation is no longer the live one
        stale.write(RECORD.__class__(**{**RECORD.as_dict(), "run_id": "run-3"}))
    assert ChampionStore("gs://bucket/gemma4-26b", "prod", "c").read().run_id == "run-2"


def test_a_corrupt_record_in_the_bucket_is_named_with_its_generation(gcs):
    uri = "gs://bucket/gemma4-26b/champions/prod.json"
    gcs.write(uri, b'{"run_id": "run-1", ')
    with pytest.raises(ValueError) as failed:
        ChampionStore("gs://bucket/gemma4-26b", "prod", "c").read()
    message = str(failed.value)
    assert message.startswith(f"champion record {uri} (generation ") and "not JSON" in message
    assert "(generation None)" not in message and "\n" not in message
