"""What bills for TPUs: the run's TPU Node objects, each from its creation to its deletion.

GKE bills a TPU VM while it exists, whether pods run on it or not, and a Node object lives as
long as its VM. Each step on the run's cluster looks at the TPU nodes (one label-selected list,
through the Kubernetes API the step already uses) before it runs and before each resume, and
keeps what it saw in its XCom `tpu_nodes`: the time of the look and each node's name and
creationTimestamp. A node's life is its creationTimestamp to the first later look that no longer
finds it (the deletion happened before that look: the bound is the looks' spacing), or to
`until` when the last look still found it. So the autoscaler's scale-down tail after a step
counts, and a wait for capacity while no node exists does not.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from tpu_rl.tpu import generation_for

XCOM_KEY = "tpu_nodes"
ACCELERATOR_KEY = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_KEY = "cloud.google.com/gke-tpu-topology"
Look = dict[str, Any]  # {"at": epoch seconds, "nodes": {name: creation epoch seconds}}


def node_selector(tpu_type: str, topology: str) -> str:
    """GKE's labels on the nodes of a TPU slice of this type and topology (the pods' node
    selector)."""
    label = generation_for(tpu_type).accelerator_label
    return f"{ACCELERATOR_KEY}={label},{TOPOLOGY_KEY}={topology}"


def look(core_v1: Any, tpu_type: str, topology: str) -> Look:
    """The TPU nodes that exist now (CoreV1Api.list_node), with their creation times."""
    listed = core_v1.list_node(label_selector=node_selector(tpu_type, topology))
    return {
        "at": time.time(),
        "nodes": {
            n.metadata.name: n.metadata.creation_timestamp.timestamp() for n in listed.items or []
        },
    }


def record_look(ti: Any, task_id: str, core_v1: Any, tpu_type: str, topology: str) -> None:
    """Add a look to this task's `tpu_nodes` XCom (a list: one per execute and resume)."""
    from tpu_rl.run_summary import write_summary

    looks = [
        *(ti.xcom_pull(task_ids=task_id, key=XCOM_KEY) or []),
        look(core_v1, tpu_type, topology),
    ]
    ti.xcom_push(key=XCOM_KEY, value=looks)
    write_summary(ti, task_id, looks=looks)  # the RL page's copy


def merged(per_task: Iterable[list[Look] | None]) -> list[Look]:
    """Every task's looks, in time order."""
    return sorted((x for looks in per_task for x in looks or []), key=lambda x: x["at"])


def node_seconds(looks: list[Look], start: float, until: float) -> float:
    """Seconds the seen TPU nodes existed, summed over nodes, within [start, until]."""
    ordered = sorted(looks, key=lambda x: x["at"])
    total = 0.0
    seen = {(name, created) for x in ordered for name, created in x["nodes"].items()}
    for name, created in seen:
        present = [x["at"] for x in ordered if x["nodes"].get(name) == created]
        gone = [
            x["at"] for x in ordered if x["at"] > present[-1] and x["nodes"].get(name) != created
        ]
        end = min(gone[0], until) if gone else until
        total += max(0.0, end - max(created, start))
    return total
