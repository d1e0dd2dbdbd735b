"""A catalogue cell as a run's settings: the tutorial's run choosing the cell."""

from __future__ import annotations

import json

from sandbox.paths import TUTORIAL_CONF

# What the tutorial's conf gives of the cell: the rest comes from the catalogue.
CELL_KEYS = ("model_name", "tpu_type", "topology", "compute_type", "cloud_image_name")


def cell_conf(cell) -> dict:
    """The tutorial's run (project, bucket, capacity) choosing this cell by model and TPU type."""
    conf = {k: v for k, v in json.loads(TUTORIAL_CONF.read_text()).items() if k not in CELL_KEYS}
    return {**conf, "model_name": cell.model_name, "tpu_type": cell.tpu_type}
