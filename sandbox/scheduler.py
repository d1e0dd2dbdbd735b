"""kube-scheduler and the cluster autoscaler, simulated over the emulator's Node objects.

A pod is bound only to a node whose taints it tolerates, whose labels match its nodeSelector
and required node affinity, whose host ports are free and whose allocatable resources fit
its requests, and where its JobSet's exclusive placement lets it (sandbox/exclusive_placement.py:
one node pool per child Job); otherwise it stays Pending with kube-scheduler's FailedScheduling
message. With
no Node objects (no cluster model) nothing is scheduled here and pods run where they are.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from sandbox import kube_events
from sandbox.exclusive_placement import ExclusivePlacement
from sandbox.kube_state import ClusterState

_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
PORTS = "node(s) didn't have free ports for the requested pod ports"


def quantity(value: Any) -> float:
    """A Kubernetes resource quantity (`8`, `179500m`, `32Gi`) as a number."""
    m = _QUANTITY.match(str(value))
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"quantities must match the regular expression: {value!r}")
    return float(m.group(1)) * _SUFFIX[m.group(2)]


def pod_requests(spec: dict[str, Any]) -> dict[str, float]:
    """Effective requests: containers summed (a missing request defaults to its limit)."""
    total: Counter[str] = Counter()
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        for name, value in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            total[name] += quantity(value)
    for c in spec.get("initContainers") or []:
        res = c.get("resources") or {}
        for name, value in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            total[name] = max(total[name], quantity(value))
    return dict(total)


def host_ports(spec: dict[str, Any]) -> set[int]:
    """Host ports a pod takes: its container ports under hostNetwork, else explicit hostPorts."""
    ports = set()
    for c in spec.get("containers") or []:
        for p in c.get("ports") or []:
            port = p.get("containerPort") if spec.get("hostNetwork") else p.get("hostPort")
            if port:
                ports.add(int(port))
    return ports


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") not in (None, "", taint.get("effect")):
            continue
        if not t.get("key") and t.get("operator") == "Exists":
            return True
        if t.get("key") != taint.get("key"):
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def match_expression(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels:
        number, bound = int(labels[key]), int(values[0])
        return number > bound if op == "Gt" else number < bound
    return False


def matches_node(spec: dict[str, Any], labels: dict[str, str]) -> bool:
    """nodeSelector and requiredDuringScheduling node affinity."""
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    return not terms or any(
        all(match_expression(e, labels) for e in term.get("matchExpressions") or [])
        for term in terms
    )


def failed_scheduling_message(reasons: Counter[str], nodes: int) -> str:
    """kube-scheduler's FitError text, with the preemption post-filter's note."""
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return (
        f"0/{nodes} nodes are available: {', '.join(parts)}. preemption: 0/{nodes} nodes are "
        f"available: {nodes} Preemption is not helpful for scheduling."
    )


class Scheduler:
    """Binds Pending pods to nodes, or explains why not; scales autoscaling pools up."""

    def __init__(self, emu: ClusterState, autoscaler: Any = None) -> None:
        self.emu = emu
        self.autoscaler = autoscaler  # autoscaler.Autoscaler: TPU slice pools, after a delay
        self._reported: dict[str, str] = {}  # pod uid -> last FailedScheduling message
        self._not_scaled: set[str] = set()  # pods the autoscaler has said it cannot help

    def schedule(self) -> None:
        nodes = self.emu.list_shared("nodes")
        if not nodes:
            return
        pods = self.emu.list_shared("pods")
        usage: dict[str, Counter[str]] = {n["metadata"]["name"]: Counter() for n in nodes}
        ports: dict[str, set[int]] = {n["metadata"]["name"]: set() for n in nodes}
        by_name = {n["metadata"]["name"]: n for n in nodes}
        placement = ExclusivePlacement(self.emu.list_shared("jobsets"))
        for pod in pods:
            node = pod["spec"].get("nodeName")
            if node in usage and pod["status"].get("phase") not in ("Succeeded", "Failed"):
                usage[node].update(pod_requests(pod["spec"]))
                ports[node] |= host_ports(pod["spec"])
                placement.bound(pod, by_name[node])
        for pod in pods:
            if pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                continue
            reasons: Counter[str] = Counter()
            chosen = None
            for node in nodes:
                why = self._unfit(pod["spec"], node, usage, ports)
                if not why and (refused := placement.refusal(pod, node)):
                    why = [refused]  # InterPodAffinity, after the resource fit
                if not why:
                    chosen = node
                    break
                reasons.update(why)
            if chosen is not None:
                self._bind(pod, chosen["metadata"]["name"])
                placement.bound(pod, chosen)
                name = chosen["metadata"]["name"]
                usage[name].update(pod_requests(pod["spec"]))
                ports[name] |= host_ports(pod["spec"])
            elif not self._scale_up(pod, nodes):
                self._unschedulable(pod, failed_scheduling_message(reasons, len(nodes)))

    def _unfit(
        self,
        spec: dict[str, Any],
        node: dict[str, Any],
        usage: dict[str, Counter[str]],
        ports: dict[str, set[int]],
    ) -> list[str]:
        """The first failing filter's reasons, in kube-scheduler's plugin order."""
        name, labels = node["metadata"]["name"], node["metadata"].get("labels") or {}
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(
                spec.get("tolerations") or [], taint
            ):
                return [
                    f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"
                ]
        if not matches_node(spec, labels):
            return [AFFINITY]
        if host_ports(spec) & ports[name]:
            return [PORTS]
        allocatable = node["status"].get("allocatable") or {}
        short = [
            f"Insufficient {resource}"
            for resource, wanted in sorted(pod_requests(spec).items())
            if wanted > quantity(allocatable.get(resource, "0")) - usage[name][resource]
        ]
        return short

    def _bind(self, pod: dict[str, Any], node: str) -> None:
        meta = pod["metadata"]
        self.emu.patch("pods", meta["namespace"], meta["name"], {"spec": {"nodeName": node}})
        self._condition(pod, "True", "", "")
        self._reported.pop(meta["uid"], None)

    def _unschedulable(self, pod: dict[str, Any], message: str) -> None:
        if self._reported.get(pod["metadata"]["uid"]) == message:
            return
        self._reported[pod["metadata"]["uid"]] = message
        self._condition(pod, "False", "Unschedulable", message)
        self._event(pod, "FailedScheduling", message, "default-scheduler")

    def _scale_up(self, pod: dict[str, Any], nodes: list[dict[str, Any]]) -> bool:
        """Cluster autoscaler: add a node to a pool whose new node would fit the pod.

        A TPU slice pool is scaled by the Autoscaler, after its provisioning delay: the pod
        stays Pending meanwhile (False: its FailedScheduling is reported too)."""
        model = getattr(self.emu, "cluster", None)
        if model is None or not model.running:
            return False
        for pool in model.pools:
            count = sum(
                1
                for n in nodes
                if (n["metadata"].get("labels") or {}).get("cloud.google.com/gke-nodepool")
                == pool.name
            )
            if count >= pool.max_nodes:
                continue
            template = pool.node(model.name, model.zone, count)
            fresh = {template["metadata"]["name"]: Counter()}
            if self._unfit(pod["spec"], template, fresh, {template["metadata"]["name"]: set()}):
                continue
            if pool.slice_hosts and self.autoscaler is not None:
                self.autoscaler.request(pod, pool, count)
                return False
            self.emu.create(template)
            self._event(
                pod,
                "TriggeredScaleUp",
                f"pod triggered scale-up: [{{{pool.name} {count}->{count + 1} "
                f"(max: {pool.max_nodes})}}]",
                "cluster-autoscaler",
                "Normal",
            )
            return True
        self._no_scale_up(pod, model, nodes)
        return False

    def _no_scale_up(self, pod: dict[str, Any], model: Any, nodes: list[dict[str, Any]]) -> None:
        """The autoscaler's NotTriggerScaleUp: why no node pool could host the pod."""
        uid = pod["metadata"]["uid"]
        if uid in self._not_scaled:
            return
        self._not_scaled.add(uid)
        reasons: Counter[str] = Counter()
        for pool in model.pools:
            template = pool.node(model.name, model.zone, 0)
            name = template["metadata"]["name"]
            why = self._unfit(pod["spec"], template, {name: Counter()}, {name: set()})
            if not why and pool.max_nodes <= pool.nodes:
                why = ["max node group size reached"]
            reasons.update(why or ["max node group size reached"])
        parts = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
        self._event(
            pod,
            "NotTriggerScaleUp",
            f"pod didn't trigger scale-up: {parts}",
            "cluster-autoscaler",
            "Normal",
        )

    def _condition(self, pod: dict[str, Any], status: str, reason: str, message: str) -> None:
        meta = pod["metadata"]
        conditions = [
            c for c in pod["status"].get("conditions") or [] if c["type"] != "PodScheduled"
        ]
        scheduled = {
            "type": "PodScheduled",
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": kube_events.now(),
        }
        if reason:
            scheduled.update(reason=reason, message=message)
        self.emu.patch_status(
            "pods", meta["namespace"], meta["name"], {"conditions": [scheduled, *conditions]}
        )

    def _event(
        self, pod: dict[str, Any], reason: str, message: str, component: str, type_: str = "Warning"
    ) -> None:
        self.emu.create(kube_events.event(pod, reason, message, component, type_))
