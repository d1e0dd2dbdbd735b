"""Deployment settings `promote` would refuse, each with the problem validate and preflight
name."""

from __future__ import annotations

IMAGE = "us-docker.pkg.dev/serving/vllm@sha256:" + "a" * 64


BAD = [
    ({"TPU_RL_VERTEX_REGISTRY": "Gemma RL"}, "TPU_RL_VERTEX_REGISTRY: 'Gemma RL' is not"),
    ({"TPU_RL_VERTEX_REGISTRY": "gemma-rl"}, "TPU_RL_VERTEX_SERVING_IMAGE: required"),
    (
        {"TPU_RL_VERTEX_REGISTRY": "gemma-rl", "TPU_RL_VERTEX_SERVING_IMAGE": "vllm/vllm:latest"},
        "TPU_RL_VERTEX_SERVING_IMAGE: 'vllm/vllm:latest' is not an image in Artifact Registry",
    ),
    (
        {
            "TPU_RL_VERTEX_REGISTRY": "gemma-rl",
            "TPU_RL_VERTEX_SERVING_IMAGE": IMAGE,
            "TPU_RL_VERTEX_REGION": "US Central",
        },
        "TPU_RL_VERTEX_REGION: 'US Central' is not a Google Cloud location name",
    ),
    (
        {
            "TPU_RL_VERTEX_REGISTRY": "gemma-rl",
            "TPU_RL_VERTEX_SERVING_IMAGE": IMAGE,
            "TPU_RL_API_ENDPOINTS": "{not json",
        },
        "TPU_RL_API_ENDPOINTS: not a JSON object",
    ),
]


IDS = ["model-id", "no-image", "image-host", "region", "endpoints"]
