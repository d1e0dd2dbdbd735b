"""tpu_rl.settings.images: the images default to MaxText's pins; a moving tag needs saying so."""

from __future__ import annotations

import pytest

from tests.support.settings import errors_for
from tpu_rl.settings.images import is_unpinned
from tpu_rl.settings.run_settings import (
    load_settings,
)


def test_images_default_to_maxtexts_pins_and_latest_needs_saying_so(tutorial_conf):
    s = load_settings(tutorial_conf)
    pathways = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/"
    assert s.pathways_server_image == (
        pathways + "server@sha256:d03068b39a8a2fab0621086ccb7c9445ce17ad34f1520159ca4ecd395346a162"
    )
    assert s.pathways_proxy_server_image == (
        pathways
        + "proxy_server@sha256:6342a3cae2818d2f887d396e9ae4156b3316f79fef186d71ff16d535b44e1724"
    )
    assert s.cloud_image_name.endswith(":0.2.4") and not s.allow_unpinned_images
    latest = {
        "pathways_server_image": pathways + "server:latest",
        "pathways_proxy_server_image": pathways + "proxy_server:latest",
    }
    assert len(errors_for(tutorial_conf, **latest)) == 2
    assert errors_for(tutorial_conf, **latest, allow_unpinned_images=True) == []
    # a digest pins whatever the tag says; a version tag is a pin
    assert (
        errors_for(
            tutorial_conf,
            pathways_server_image=s.pathways_server_image.replace("server@", "server:latest@"),
        )
        == []
    )
    assert errors_for(tutorial_conf, pathways_server_image=pathways + "server:jax-0.8.1") == []


@pytest.mark.parametrize(
    ("reference", "unpinned"),
    [
        ("r.io/a/b:latest", True),
        ("r.io/a/b:latest@sha256:" + "a" * 64, False),
        ("r.io/a/b:0.2.4", False),
        ("not a reference:latest", False),
    ],
)
def test_only_a_moving_tag_without_a_digest_is_unpinned(reference, unpinned):
    assert is_unpinned(reference) is unpinned
