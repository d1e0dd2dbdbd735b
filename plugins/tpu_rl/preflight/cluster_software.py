"""What an existing cluster runs for the run: the JobSet and Kueue controllers (their versions
from the controller Deployments' images), a ClusterQueue covering what the run requests, and
the PriorityClass the deployment names. Read with the Kubernetes client on the cluster.

Controllers: JobSet's release manifests install Deployment `jobset-controller-manager` in
`jobset-system`, Kueue's `kueue-controller-manager` in `kueue-system`, image tag = version
(kubernetes-sigs/jobset and kubernetes-sigs/kueue config/default; `kubectl kueue version`
prints that image). Minimums: Kueue 0.15, whose kueue.x-k8s.io/v1beta2 the run uses
(tpu_rl.kube.kueue_rules; kubernetes-sigs/kueue CHANGELOG-0.15.md); JobSet v0.10.1, the CRD the
run's JobSet is validated against and the one the blueprint installs (docs/sources.md#jobset).
"""

from __future__ import annotations

import re
from typing import Any

from kubernetes.client import AppsV1Api, CustomObjectsApi, SchedulingV1Api
from kubernetes.client.rest import ApiException

from tpu_rl import deployment
from tpu_rl.backend import kueue
from tpu_rl.cluster.kueue_config import TPU
from tpu_rl.kube.kueue_rules import GROUP, VERSION
from tpu_rl.layout import RunLayout
from tpu_rl.preflight.result import CheckResult, failed, passed

CONTROLLERS = {
    "jobset": ("jobset-system", "jobset-controller-manager", (0, 10, 1)),
    "kueue": ("kueue-system", "kueue-controller-manager", (0, 15, 0)),
}
INSTALL = {
    "jobset": "kubectl apply --server-side -f https://github.com/kubernetes-sigs/jobset/"
    "releases/download/v0.10.1/manifests.yaml",
    "kueue": "kubectl apply --server-side -f https://github.com/kubernetes-sigs/kueue/"
    "releases/download/v0.15.0/manifests.yaml (or redeploy with the blueprint's kubectl-apply)",
}
QUEUE, PRIORITY = "kueue queue covers the run", "priority class"
_VERSION = re.compile(r":v?(\d+)\.(\d+)\.(\d+)")


def check_controller(client: Any, name: str) -> CheckResult:
    """The controller's Deployment exists and its image is at least the minimum version."""
    namespace, deployment_name, least = CONTROLLERS[name]
    shown = ".".join(map(str, least))
    try:
        found = AppsV1Api(client).read_namespaced_deployment(deployment_name, namespace)
    except ApiException as err:
        if err.status != 404:
            raise
        return failed(
            f"{name} installed",
            f"no Deployment {namespace}/{deployment_name}: {name} is not installed",
            INSTALL[name],
        )
    images = [c.image for c in found.spec.template.spec.containers]
    versions = [tuple(map(int, m.groups())) for i in images if (m := _VERSION.search(i))]
    if not versions or versions[0] < least:
        return failed(
            f"{name} installed",
            f"{name} runs {', '.join(images)}; the run needs v{shown} or later",
            INSTALL[name],
        )
    return passed(f"{name} installed", f"{images[0]} (v{shown} or later)")


def _api(plural: str) -> dict[str, str]:
    return {"group": GROUP, "version": VERSION, "plural": plural}


def check_queue(client: Any, layout: RunLayout) -> CheckResult:
    """The LocalQueue leads to a ClusterQueue covering every resource the Pathways backend
    requests, with TPU quota for the run's chips (tpu_rl.backend.kueue, xpk #603)."""
    s = layout.settings
    if not s.kueue_queue:
        return passed(QUEUE, "kueue_queue is empty: the run's objects bypass Kueue")
    custom = CustomObjectsApi(client)
    fix = (
        "apply Cluster Toolkit's Pathways Kueue configuration (google.com/tpu, cpu and memory "
        "in one group) or set kueue_queue to a queue that covers them"
    )
    try:
        local = custom.get_namespaced_custom_object(
            namespace=s.namespace, name=s.kueue_queue, **_api("localqueues")
        )
        name = (local.get("spec") or {}).get("clusterQueue") or s.kueue_queue
        cluster_queue = custom.get_cluster_custom_object(name=name, **_api("clusterqueues"))
    except ApiException as err:
        if err.status != 404:
            raise
        return failed(
            QUEUE,
            f"LocalQueue {s.namespace}/{s.kueue_queue} or its ClusterQueue "
            f"does not exist ({err.reason})",
            fix,
        )
    from tpu_rl.backend.jobset import backend_jobset

    needed = kueue.requested_resources(backend_jobset(layout))
    covered = kueue.covered_resources(cluster_queue)
    if not covered:
        return passed(
            QUEUE, f"ClusterQueue {name} is empty: the backend step fills it as gcluster does"
        )
    if missing := sorted(needed - covered):
        return failed(
            QUEUE,
            f"ClusterQueue {name} covers {', '.join(sorted(covered))}, not "
            f"{', '.join(missing)}, which the Pathways backend requests: it would never be "
            "admitted",
            fix,
        )
    quota = _tpu_quota(cluster_queue)
    chips = s.slices.chips
    if quota < chips:
        return failed(
            QUEUE,
            f"ClusterQueue {name} holds {quota:g} google.com/tpu, the run requests {chips}",
            f"raise the nominalQuota of google.com/tpu in ClusterQueue {name} to {chips}",
        )
    return passed(
        QUEUE,
        f"ClusterQueue {name} covers {', '.join(sorted(needed))}; {quota:g} TPU chips for {chips}",
    )


def _tpu_quota(cluster_queue: dict[str, Any]) -> float:
    return sum(
        float(r.get("nominalQuota") or 0)
        for g in (cluster_queue.get("spec") or {}).get("resourceGroups") or []
        for f in g.get("flavors") or []
        for r in f.get("resources") or []
        if r.get("name") == TPU
    )


def check_priority_class(client: Any) -> CheckResult:
    """The PriorityClass the deployment's pods name exists (a pod naming a missing one is
    refused by the Priority admission plugin; ml-auto-solutions #1375: jobs left suspended)."""
    name = deployment.priority_class()
    if not name:
        return passed(PRIORITY, "the run's pods name no PriorityClass (TPU_RL_PRIORITY_CLASS)")
    try:
        found = SchedulingV1Api(client).read_priority_class(name)
    except ApiException as err:
        if err.status != 404:
            raise
        return failed(
            PRIORITY,
            f"no PriorityClass {name!r} in the cluster",
            f"kubectl create priorityclass {name} --value=<n>, or unset TPU_RL_PRIORITY_CLASS "
            "(the blueprint makes very-low, low, medium, high, very-high)",
        )
    return passed(PRIORITY, f"PriorityClass {name} exists (value {found.value})")
