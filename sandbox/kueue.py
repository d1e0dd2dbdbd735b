"""Kueue, simulated: the suspend webhook, one Workload per queued Job/JobSet, and admission.

A Job or JobSet labelled `kueue.x-k8s.io/queue-name` is suspended at creation. Its Workload
is admitted (quota reserved, the owner unsuspended with the flavor's node labels and
tolerations) only when its LocalQueue and ClusterQueue exist and every resource its pods
request is covered by the ClusterQueue and fits the quota left; otherwise the Workload's
`QuotaReserved` condition is False with Kueue's own message (kueue v0.14 wording).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import Counter
from typing import Any

from sandbox import kube_events
from sandbox.kube_state import KUEUE_GROUP, ApiError, ClusterState, Resource, clone
from sandbox.scheduler import match_expression, pod_requests, quantity

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
MANAGED_KINDS = ("Job", "JobSet")


def _queue(obj: dict[str, Any]) -> str | None:
    return (obj["metadata"].get("labels") or {}).get(QUEUE_LABEL)


def _owned_by_jobset(obj: dict[str, Any]) -> bool:
    return any(r.get("kind") == "JobSet" for r in obj["metadata"].get("ownerReferences") or [])


def suspend_webhook(resource: Resource, obj: dict[str, Any]) -> None:
    """Kueue's mutating webhook: a queued Job/JobSet starts suspended."""
    if resource.kind in MANAGED_KINDS and _queue(obj) and not _owned_by_jobset(obj):
        obj.setdefault("spec", {})["suspend"] = True


def pod_sets(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The Workload's podSets: `main` for a Job, one per replicatedJob for a JobSet."""
    spec = obj["spec"]
    if obj["kind"] == "Job":
        return [{"name": "main", "count": spec.get("parallelism", 1), "template": spec["template"]}]
    sets = []
    for rjob in spec.get("replicatedJobs") or []:
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        count = rjob.get("replicas", 1) * job_spec.get("parallelism", 1)
        sets.append({"name": rjob["name"], "count": count, "template": job_spec.get("template")})
    return sets


def _flavor_fits(
    flavor: dict[str, Any] | None, group_keys: set[str], pod_spec: dict[str, Any]
) -> bool:
    """Kueue's flavor selector: the pods' nodeSelector and required node affinity, cut to the
    label keys the group's flavors use, must be satisfied by this flavor's node labels."""
    labels = ((flavor or {}).get("spec") or {}).get("nodeLabels") or {}
    cut = {k: v for k, v in (pod_spec.get("nodeSelector") or {}).items() if k in group_keys}
    if any(labels.get(k) != v for k, v in cut.items()):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = [
        [e for e in term.get("matchExpressions") or [] if e["key"] in group_keys]
        for term in required.get("nodeSelectorTerms") or []
    ]
    return not terms or any(all(match_expression(e, labels) for e in term) for term in terms)


class Kueue:
    """Kueue's controllers over the emulator's objects; active once ClusterQueues exist."""

    def __init__(self, emu: ClusterState) -> None:
        self.emu = emu

    def reconcile(self) -> None:
        """One pass over the stored objects (list_shared: a pass only reads them; _start
        changes a copy of its owner)."""
        if not self.emu.list_shared("clusterqueues"):
            return
        workloads = {
            (w["metadata"]["labels"] or {}).get(JOB_UID_LABEL): w
            for w in self.emu.list_shared("workloads")
        }
        for plural in ("jobsets", "jobs"):
            for owner in self.emu.list_shared(plural):
                if not _queue(owner) or _owned_by_jobset(owner):
                    continue
                workload = workloads.get(owner["metadata"]["uid"])
                if workload is None:
                    if owner["metadata"].get("deletionTimestamp"):
                        continue  # as Kueue: no new Workload for a Job or JobSet being deleted
                    workload = self._create(owner)
                self._sync(owner, workload)

    # -- Workloads --------------------------------------------------------------------------

    def _create(self, owner: dict[str, Any]) -> dict[str, Any]:
        meta = owner["metadata"]
        digest = hashlib.sha1(meta["uid"].encode()).hexdigest()[:5]
        name = f"{owner['kind'].lower()}-{meta['name']}"[:57] + f"-{digest}"
        return self.emu.create(
            {
                "apiVersion": f"{KUEUE_GROUP}/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": name,
                    "namespace": meta["namespace"],
                    "labels": {JOB_UID_LABEL: meta["uid"]},
                    "ownerReferences": [
                        {
                            "apiVersion": owner["apiVersion"],
                            "kind": owner["kind"],
                            "name": meta["name"],
                            "uid": meta["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": {
                    "queueName": _queue(owner),
                    "podSets": pod_sets(owner),
                    "priority": 0,
                    "active": True,
                },
            }
        )

    def _sync(self, owner: dict[str, Any], workload: dict[str, Any]) -> None:
        ns, name = workload["metadata"]["namespace"], workload["metadata"]["name"]
        if _has(workload, "Finished") or workload["metadata"].get("deletionTimestamp"):
            return
        if _finished(owner):
            self._condition(ns, name, "Finished", "True", "Succeeded", "Job finished")
            return
        if _has(workload, "Admitted"):
            return
        admission, message, reason = self._assign(owner, workload)
        if admission is None:
            if _condition_message(workload, "QuotaReserved") != message:
                self._condition(ns, name, "QuotaReserved", "False", reason, message)
                self._event(workload, "Pending", message)
            return
        self.emu.patch_status("workloads", ns, name, {"admission": admission})
        cq = admission["clusterQueue"]
        self._condition(
            ns,
            name,
            "QuotaReserved",
            "True",
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {cq}",
        )
        self._condition(ns, name, "Admitted", "True", "Admitted", "The workload is admitted")
        self._event(workload, "QuotaReserved", f"Quota reserved in ClusterQueue {cq}", "Normal")
        self._start(owner, admission)

    def _assign(
        self, owner: dict[str, Any], workload: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, str, str]:
        """(admission, "", "") or (None, Kueue's message, condition reason)."""
        ns, queue = workload["metadata"]["namespace"], workload["spec"]["queueName"]
        local = self.emu.get("localqueues", ns, queue)
        if local is None:
            return None, f"LocalQueue {queue} doesn't exist", "Inadmissible"
        cq_name = local["spec"]["clusterQueue"]
        cq = self.emu.get("clusterqueues", "", cq_name)
        if cq is None:
            return None, f"ClusterQueue {cq_name} doesn't exist", "Inadmissible"
        used = self._usage(cq_name)
        assignments = []
        for pod_set in workload["spec"]["podSets"]:
            spec = (pod_set.get("template") or {}).get("spec") or {}
            per_pod = pod_requests(spec)
            wanted = {r: q * pod_set["count"] for r, q in per_pod.items() if q}
            flavors, problem = self._flavors(cq, spec, wanted, used)
            if problem:
                return (
                    None,
                    f"couldn't assign flavors to pod set {pod_set['name']}: {problem}",
                    "Pending",
                )
            assignments.append(
                {
                    "name": pod_set["name"],
                    "count": pod_set["count"],
                    "flavors": flavors,
                    "resourceUsage": {r: _format(q) for r, q in wanted.items()},
                }
            )
            for resource, flavor in flavors.items():
                used[(flavor, resource)] += wanted[resource]
        return {"clusterQueue": cq_name, "podSetAssignments": assignments}, "", ""

    def _flavors(
        self,
        cq: dict[str, Any],
        pod_spec: dict[str, Any],
        wanted: dict[str, float],
        used: Counter[tuple[str, str]],
    ) -> tuple[dict[str, str], str]:
        chosen: dict[str, str] = {}
        for resource in sorted(wanted):
            group = next(
                (
                    g
                    for g in cq["spec"].get("resourceGroups") or []
                    if resource in g.get("coveredResources", [])
                ),
                None,
            )
            if group is None:
                return {}, f"resource {resource} unavailable in ClusterQueue"
            problems: list[str] = []
            flavors = {
                f["name"]: self.emu.get("resourceflavors", "", f["name"])
                for f in group.get("flavors") or []
            }
            group_keys = {
                k
                for f in flavors.values()
                for k in ((f or {}).get("spec") or {}).get("nodeLabels") or {}
            }
            for flavor in group.get("flavors") or []:
                fname = flavor["name"]
                if not _flavor_fits(flavors[fname], group_keys, pod_spec):
                    problems.append(f"flavor {fname} doesn't match node affinity")
                    continue
                quota = next(
                    (
                        quantity(r["nominalQuota"])
                        for r in flavor["resources"]
                        if r["name"] == resource
                    ),
                    0.0,
                )
                if wanted[resource] > quota:
                    problems.append(
                        f"insufficient quota for {resource} in flavor {fname}, request > maximum "
                        f"capacity ({_format(wanted[resource])} > {_format(quota)})"
                    )
                    continue
                missing = used[(fname, resource)] + wanted[resource] - quota
                if missing > 0:
                    problems.append(
                        f"insufficient unused quota for {resource} in flavor {fname}, "
                        f"{_format(missing)} more needed"
                    )
                    continue
                chosen[resource] = fname
                break
            else:
                return {}, ", ".join(problems)
        return chosen, ""

    def _usage(self, cq_name: str) -> Counter[tuple[str, str]]:
        """Quota held by admitted, unfinished Workloads of this ClusterQueue."""
        used: Counter[tuple[str, str]] = Counter()
        for w in self.emu.list_shared("workloads"):
            admission = (w.get("status") or {}).get("admission") or {}
            if admission.get("clusterQueue") != cq_name or _has(w, "Finished"):
                continue
            for ps in admission.get("podSetAssignments") or []:
                for resource, flavor in (ps.get("flavors") or {}).items():
                    used[(flavor, resource)] += quantity(ps["resourceUsage"][resource])
        return used

    def _start(self, owner: dict[str, Any], admission: dict[str, Any]) -> None:
        """Unsuspend the owner, adding each pod set's flavor node labels and tolerations."""
        owner = clone(owner)  # a stored object: reconcile lists them shared
        spec = owner["spec"]
        by_name = {ps["name"]: ps for ps in admission["podSetAssignments"]}
        templates = (
            [("main", spec["template"])]
            if owner["kind"] == "Job"
            else [(r["name"], r["template"]["spec"]["template"]) for r in spec["replicatedJobs"]]
        )
        for ps_name, template in templates:
            pod_spec = template.setdefault("spec", {})
            for fname in set((by_name.get(ps_name) or {}).get("flavors", {}).values()):
                flavor = (self.emu.get("resourceflavors", "", fname) or {}).get("spec") or {}
                selector = {
                    **(flavor.get("nodeLabels") or {}),
                    **(pod_spec.get("nodeSelector") or {}),
                }
                if selector:
                    pod_spec["nodeSelector"] = selector
                tolerations = list(pod_spec.get("tolerations") or [])
                tolerations += [t for t in flavor.get("tolerations") or [] if t not in tolerations]
                if tolerations:
                    pod_spec["tolerations"] = tolerations
        spec["suspend"] = False
        meta = owner["metadata"]
        plural = "jobs" if owner["kind"] == "Job" else "jobsets"
        with contextlib.suppress(ApiError):  # deleted meanwhile
            self.emu.patch(plural, meta["namespace"], meta["name"], {"spec": spec})

    def _condition(
        self, ns: str, name: str, type_: str, status: str, reason: str, message: str
    ) -> None:
        workload = self.emu.get("workloads", ns, name)
        if workload is None:
            return
        now = kube_events.now()
        conditions = [
            c for c in (workload.get("status") or {}).get("conditions") or [] if c["type"] != type_
        ]
        conditions.append(
            {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": now,
                "observedGeneration": 1,
            }
        )
        self.emu.patch_status("workloads", ns, name, {"conditions": conditions})

    def _event(
        self, workload: dict[str, Any], reason: str, message: str, type_: str = "Normal"
    ) -> None:
        self.emu.create(kube_events.event(workload, reason, message, "kueue-admission", type_))


def _has(obj: dict[str, Any], type_: str) -> bool:
    return any(
        c["type"] == type_ and c["status"] == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _condition_message(obj: dict[str, Any], type_: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return c.get("message")
    return None


def _finished(owner: dict[str, Any]) -> bool:
    status = owner.get("status") or {}
    return bool(status.get("terminalState")) or _has(owner, "Complete") or _has(owner, "Failed")


def _format(value: float) -> str:
    """A quantity back as text: whole numbers plain, memory in Gi, else millis."""
    if value == int(value) and value < 2**30:
        return str(int(value))
    if value >= 2**30 and value % 2**30 == 0:
        return f"{int(value // 2**30)}Gi"
    return f"{round(value * 1000)}m" if value < 1e6 else str(int(value))
