"""tpu_rl.preflight.images: image manifest URLs, and each image setting's manifest found."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tpu_rl.preflight.images import check_images, manifest_url
from tpu_rl.settings.images import IMAGE_SETTINGS
from tpu_rl.settings.run_settings import load_settings


def test_manifest_urls_follow_the_registry_api():
    assert manifest_url("us-docker.pkg.dev/a/b/c:0.2.4") == (
        "us-docker.pkg.dev",
        "https://us-docker.pkg.dev/v2/a/b/c/manifests/0.2.4",
    )
    digest = "sha256:" + "a" * 64
    assert manifest_url(f"gcr.io/p/i@{digest}")[1] == f"https://gcr.io/v2/p/i/manifests/{digest}"
    assert manifest_url("ubuntu:22.04") == (
        "registry-1.docker.io",
        "https://registry-1.docker.io/v2/library/ubuntu/manifests/22.04",
    )


class Registry:
    """GoogleApi's HEAD of a manifest on a Google registry, answering `status`."""

    def __init__(self, status: int) -> None:
        self.status, self.heads = status, []

    def head(self, url: str, headers: dict[str, str]) -> SimpleNamespace:
        self.heads.append(url)
        return SimpleNamespace(
            status_code=self.status, headers={"Docker-Content-Digest": "sha256:d"}
        )


def test_each_image_setting_is_one_result_found_with_its_digest(tutorial_conf):
    s = load_settings(tutorial_conf)
    api = Registry(200)
    results = check_images(api, s)
    assert [r.name for r in results] == [f"image pullable ({x})" for x in IMAGE_SETTINGS]
    assert all(r.passed and r.evidence.endswith("found (sha256:d)") for r in results)
    assert api.heads == [manifest_url(getattr(s, x))[1] for x in IMAGE_SETTINGS]


@pytest.mark.parametrize(
    ("status", "says"), [(403, "refused the manifest of"), (404, "no manifest")]
)
def test_a_refused_or_missing_manifest_on_a_google_registry_fails(tutorial_conf, status, says):
    s = load_settings(tutorial_conf)
    results = check_images(Registry(status), s)
    assert all(not r.passed and says in r.evidence for r in results)


def test_another_registry_asking_for_credentials_passes_unchecked(tutorial_conf, monkeypatch):
    import requests

    monkeypatch.setattr(
        requests, "head", lambda url, **kw: SimpleNamespace(status_code=401, headers={})
    )
    s = load_settings({**tutorial_conf, "cloud_image_name": "docker.io/library/ubuntu:22.04"})
    first = check_images(Registry(200), s)[0]
    assert first.passed and "asks for credentials (HTTP 401)" in first.evidence
