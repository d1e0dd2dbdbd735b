"""What `make plan` says of the champion comparison's gains, approval and promotion."""

from __future__ import annotations

from typing import Any

from tpu_rl import deployment
from tpu_rl.layout import RunLayout
from tpu_rl.names import Step


def gains_text(gains: dict[str, float]) -> str:
    """`accuracy +0, mean_reward +0.01`: the gains a setting asks, in words."""
    return ", ".join(f"{name} {gain:+g}" for name, gain in gains.items())


def promotion_steps(layout: RunLayout) -> list[dict[str, Any]]:
    """Approval (or not) and promotion, after the cleanups."""
    s = layout.settings
    asks = (
        f"Ask a person to approve the export (Required Actions); no answer in "
        f"{s.approval_timeout_minutes} min rejects."
        if s.approval == "required"
        else "No approval asked (approval=none)."
    )
    registry = deployment.vertex_registry()
    promotes = (
        f"Record the export as champion in {layout.model_root}/champions/"
        f"{layout.deployment}.json"
        + (f"; upload it to Vertex AI model {registry}, alias champion." if registry else ".")
    )
    return [
        {"id": Step.APPROVE, "description": asks},
        {"id": Step.PROMOTE, "description": promotes},
    ]
