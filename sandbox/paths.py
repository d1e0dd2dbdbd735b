"""Where the repository's files the sandbox reads are: the tutorial's run config and the vendored
Cluster Toolkit release files it serves as `gcluster`'s bundle (vendor/SOURCE.md)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TUTORIAL_CONF = REPO / "include" / "examples" / "tutorial.json"
BLUEPRINT_FIXTURES = Path(__file__).resolve().parent / "vendor" / "cluster-toolkit"
