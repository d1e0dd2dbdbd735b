"""JobSet's exclusive placement, as kube-scheduler sees it: with the JobSet annotation
`alpha.jobset.sigs.k8s.io/exclusive-topology: <node label>` each child Job's pods share one
value of the label (one node pool: one TPU slice) and no two Jobs share a value. A Job sized for
more than one slice, or more Jobs than slices, leaves pods Pending, as on GKE.

Source: kubernetes-sigs/jobset@e8ce10b, pkg/webhooks/pod_mutating_webhook.go: patchPod (the
leader pod, completion index 0, gets setExclusiveAffinities: required pod affinity to its own
Job's pods and anti-affinity to pods of other Jobs, by the annotation's topology key) and
setNodeSelector (a follower takes its leader's node's topology value as a nodeSelector). Here a
Job is its `job-name` label (JobSet's job-key label is one per Job too). The reasons are
kube-scheduler's InterPodAffinity filter's ("node(s) didn't match pod affinity rules",
"node(s) didn't match pod anti-affinity rules"; wording as kube-scheduler's, not checked here).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOB_NAME = "job-name"
AFFINITY_RULES = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_RULES = "node(s) didn't match pod anti-affinity rules"


class ExclusivePlacement:
    """Which topology domain each exclusive Job holds, from the pods already bound."""

    def __init__(self, jobsets: Iterable[dict[str, Any]]) -> None:
        self.keys = {
            (js["metadata"].get("namespace", "default"), js["metadata"]["name"]): key
            for js in jobsets
            if (key := (js["metadata"].get("annotations") or {}).get(EXCLUSIVE))
        }
        self.held: dict[tuple[str, str, str], str] = {}  # (ns, jobset, job) -> domain

    def _job_of(self, pod: dict[str, Any]) -> tuple[tuple[str, str, str], str] | None:
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        jobset = (meta.get("namespace", "default"), labels.get(JOBSET_NAME, ""))
        key = self.keys.get(jobset)
        if key is None or JOB_NAME not in labels:
            return None
        return (*jobset, labels[JOB_NAME]), key

    def bound(self, pod: dict[str, Any], node: dict[str, Any]) -> None:
        """A pod of an exclusive Job is on `node`: its Job holds the node's domain."""
        if found := self._job_of(pod):
            job, key = found
            domain = (node["metadata"].get("labels") or {}).get(key)
            if domain is not None:
                self.held.setdefault(job, domain)

    def refusal(self, pod: dict[str, Any], node: dict[str, Any]) -> str | None:
        """Why `node` breaks the pod's Job's exclusive placement, or None."""
        found = self._job_of(pod)
        if found is None:
            return None
        job, key = found
        domain = (node["metadata"].get("labels") or {}).get(key)
        if job in self.held:
            return None if self.held[job] == domain else AFFINITY_RULES
        others = {d for j, d in self.held.items() if j[:2] == job[:2] and j != job}
        return ANTI_AFFINITY_RULES if domain in others else None
