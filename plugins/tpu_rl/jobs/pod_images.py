"""The image digests a Job's pods ran: each container's `imageID`, by the image its spec names.

Kubernetes sets `status.containerStatuses[].imageID` once the runtime has pulled the image
("ImageID is the image ID of the container's image. The image ID may not match the image ID of
the image used in the PodSpec, as it may have been resolved by the runtime": core/v1
ContainerStatus); on GKE's containerd it is the repository digest, `<repository>@sha256:<hex>`.
A container matched by its name to the spec names the reference the settings gave; the status's
own `image` may be the resolved one, so it is not used.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})$")


def pod_image_digests(client: CoreV1Api, namespace: str, selector: str) -> dict[str, str]:
    """{image reference in the pod spec: its digest} over the pods `selector` selects (a Job's:
    `job-name=<job>`) that reported one."""
    pods = client.list_namespaced_pod(namespace, label_selector=selector).items
    found: dict[str, str] = {}
    for pod in pods:
        spec = {c.name: c.image for c in pod.spec.containers}
        for status in (pod.status and pod.status.container_statuses) or []:
            match = DIGEST.search(status.image_id or "")
            if match and status.name in spec:
                found[spec[status.name]] = match.group(1)
    return found
