"""The sandbox's project as a run's settings name it (project, region, zone, cluster, bucket,
reservation, and polls short enough for tests) and the Hugging Face token its Secret holds:
below the harness, which starts runs with them, and the emulators, which answer for them."""

from __future__ import annotations

HF_TOKEN = "hf_SandboxSecretToken0123456789abcdef"
SETTINGS = {
    "project": "tpu-rl-sandbox",
    "region": "us-east5",
    "zone": "us-east5-b",
    "cluster_name": "gemma4-rl",
    "gcs_bucket": "tpu-rl-sandbox-bucket",
    "reservation": "v6e-32-reservation",
    "poll_interval_seconds": 1,
    "pending_timeout_minutes": 1,
}
