"""The images a run pulls: their defaults (MaxText 0.2.4's) and what counts as pinned."""

from __future__ import annotations

from tpu_rl.settings.references import IMAGE_REFERENCE

TUTORIAL_IMAGE = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4"
# The Pathways images MaxText 0.2.4 runs its RL tutorial with, pinned by digest
# (AI-Hypercomputer/maxtext, tag maxtext-v0.2.4:
# src/maxtext/trainers/post_train/rl/scripts/run_gemma4_e4b_rl.sh, PATHWAYS_SERVER_IMAGE and
# PATHWAYS_PROXY_SERVER_IMAGE; docs/tutorials/posttraining/rl_gemma4_e4b.md: the script "pins
# the Pathways component images"). gcluster's own default is :latest (cluster-toolkit
# pkg/orchestrator/gke/gke_job_orchestrator.go, defaultPathwaysServerImage).
PATHWAYS_REPO = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways"
PATHWAYS_SERVER_IMAGE = (
    f"{PATHWAYS_REPO}/server"
    "@sha256:d03068b39a8a2fab0621086ccb7c9445ce17ad34f1520159ca4ecd395346a162"
)
PATHWAYS_PROXY_SERVER_IMAGE = (
    f"{PATHWAYS_REPO}/proxy_server"
    "@sha256:6342a3cae2818d2f887d396e9ae4156b3316f79fef186d71ff16d535b44e1724"
)
# each image setting and its role in the run (the lineage's TPU facet names images by role)
IMAGE_ROLES = {
    "cloud_image_name": "maxtext",
    "pathways_server_image": "pathways_server",
    "pathways_proxy_server_image": "pathways_proxy_server",
}
IMAGE_SETTINGS = tuple(IMAGE_ROLES)
MOVING_TAGS = {"latest"}  # a registry moves it to each push


def is_unpinned(reference: str) -> bool:
    """A reference whose tag moves and that no digest fixes (`repo:latest`)."""
    match = IMAGE_REFERENCE.fullmatch(reference)
    return bool(match and not match.group("digest") and match.group("tag") in MOVING_TAGS)
