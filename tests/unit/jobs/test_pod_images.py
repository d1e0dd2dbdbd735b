"""A Job's pods' image digests: each container's imageID, by the reference its spec names; none
before the image is pulled or for a container the spec does not name."""

from __future__ import annotations

from types import SimpleNamespace

from kubernetes.client import (
    V1Container,
    V1ContainerStatus,
    V1ObjectMeta,
    V1Pod,
    V1PodList,
    V1PodSpec,
    V1PodStatus,
)

from tpu_rl.jobs.pod_images import pod_image_digests

TAG = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4"
DIGEST = "sha256:" + "a" * 64


def pod(name: str, image_id: str, status_name: str = "maxtext") -> V1Pod:
    return V1Pod(
        metadata=V1ObjectMeta(name=name),
        spec=V1PodSpec(containers=[V1Container(name="maxtext", image=TAG)]),
        status=V1PodStatus(
            container_statuses=[
                V1ContainerStatus(
                    name=status_name,
                    image="resolved/by/the-runtime:0.2.4",  # not the spec's: not used
                    image_id=image_id,
                    ready=True,
                    restart_count=0,
                )
            ]
        ),
    )


def test_the_digest_each_pod_reported_by_the_spec_s_reference():
    asked = []

    def list_namespaced_pod(namespace, label_selector):
        asked.append((namespace, label_selector))
        pods = [
            pod("pending", ""),  # not pulled yet
            pod("other", f"x@{'sha256:' + 'b' * 64}", status_name="sidecar"),  # not in the spec
            pod(
                "ran",
                f"us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training@{DIGEST}",
            ),
        ]
        return V1PodList(items=pods)

    client = SimpleNamespace(list_namespaced_pod=list_namespaced_pod)
    assert pod_image_digests(client, "default", "job-name=rl-export") == {TAG: DIGEST}
    assert asked == [("default", "job-name=rl-export")]
