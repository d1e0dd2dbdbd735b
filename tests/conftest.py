"""Shared fixtures: the tutorial's settings and the schemas rendered objects must meet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TUTORIAL_CONF = REPO / "include" / "examples" / "tutorial.json"
SEED = SHARED / "seed" / "000_cc31040e9d977fc6.txt"
JOBSET_CRD = SHARED / "schemas" / "jobset-v0.10.1.crd.yaml"
BLUEPRINT_FIXTURES = SHARED / "fixtures" / "cluster-toolkit"


@pytest.fixture
def tutorial_conf() -> dict:
    return json.loads(TUTORIAL_CONF.read_text())
