"""The run's images exist and the caller may pull them: a manifest HEAD on the registry's
Docker Registry HTTP API V2 (distribution spec, "Checking if content exists in the registry":
HEAD /v2/<name>/manifests/<reference>; 404 MANIFEST_UNKNOWN, 401/403 when refused).

Google's registries (Artifact Registry *.pkg.dev, Container Registry *gcr.io) take the caller's
OAuth token as a bearer token
(https://cloud.google.com/artifact-registry/docs/docker/authentication#token); another
registry is asked anonymously: a Google token never leaves for a third party.
"""

from __future__ import annotations

import requests

from tpu_rl import deployment
from tpu_rl.preflight.google_api import TIMEOUT_S, GoogleApi
from tpu_rl.preflight.result import CheckResult, failed, passed
from tpu_rl.settings.fields import RunSettings
from tpu_rl.settings.images import IMAGE_SETTINGS
from tpu_rl.settings.references import IMAGE_REFERENCE

NAME = "image pullable"
MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
GOOGLE_REGISTRIES = (".pkg.dev", "gcr.io")


def manifest_url(reference: str) -> tuple[str, str]:
    """(registry host, manifest URL) of an image reference (Docker Hub when no host)."""
    match = IMAGE_REFERENCE.fullmatch(reference)
    if match is None:
        raise ValueError(f"{reference!r} is not an image reference")
    name, host = match.group("name"), match.group("domain")
    path = name.removeprefix(f"{host}/") if host else name
    if not host or ("." not in host and ":" not in host and host != "localhost"):
        host, path = "registry-1.docker.io", (name if "/" in name else f"library/{name}")
    ref = match.group("digest") or match.group("tag") or "latest"
    return host, f"{deployment.api_endpoint(host)}/v2/{path}/manifests/{ref}"


def check_images(api: GoogleApi, s: RunSettings) -> list[CheckResult]:
    """One result per image setting."""
    return [_check_image(api, setting, getattr(s, setting)) for setting in IMAGE_SETTINGS]


def _check_image(api: GoogleApi, setting: str, reference: str) -> CheckResult:
    host, url = manifest_url(reference)
    headers = {"Accept": MANIFEST_TYPES}
    if host.endswith(GOOGLE_REGISTRIES):
        response = api.head(url, headers)
    else:
        response = requests.head(url, headers=headers, timeout=TIMEOUT_S, allow_redirects=True)
    name = f"{NAME} ({setting})"
    status = response.status_code
    if status == 200:
        digest = response.headers.get("Docker-Content-Digest", "")
        return passed(name, f"{reference} found{f' ({digest})' if digest else ''}")
    if status in (401, 403) and not host.endswith(GOOGLE_REGISTRIES):
        return passed(
            name,
            f"{host} asks for credentials (HTTP {status}); the nodes pull with their own "
            "(imagePullSecrets), not checked here",
        )
    if status in (401, 403):
        return failed(
            name,
            f"{host} refused the manifest of {reference} (HTTP {status})",
            "grant roles/artifactregistry.reader on the repository to the GCP connection's "
            "account and to the node pools' service accounts",
        )
    return failed(
        name,
        f"no manifest {reference} on {host} (HTTP {status})",
        f"set {setting} to an image that exists (gcloud artifacts docker images list "
        f"{reference.split('@')[0].rsplit(':', 1)[0]})",
    )
