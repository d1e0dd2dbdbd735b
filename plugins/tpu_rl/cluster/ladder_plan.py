"""What each rung of the capacity ladder creates, for `make plan`: the rung's TPU pool (its own
name and zone, its create timeout) and edits, what stays (the cluster's zone, its system pool
and `cpu-np`), the node label its TPU pods select, how long it waits for the slice, and the
blueprint and deployment file its `gcluster deploy` uses (tpu_rl.cluster.ladder, "The shape on
a ladder")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from tpu_rl.cluster import blueprint, capacity, ladder

if TYPE_CHECKING:
    from tpu_rl.settings.fields import RunSettings


def rung_file(index: int, name: str) -> str:
    """The plan's file of rung `index` (1-based): rung 1's are the cluster's own files."""
    return name if index == 1 else f"rung-{index}.{name}"


def ladder_plan(
    blueprint_yaml: str, settings: RunSettings, deployment: str, state_prefix: str
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """One row per rung, in the order they are tried, and the files of the rungs after the
    first (name -> text)."""
    rows, files = [], {}
    for i, rung in enumerate(ladder.rungs(settings), 1):
        on = ladder.at_rung(settings, rung)
        steps = blueprint.plan(blueprint_yaml, on, deployment, state_prefix)
        if i > 1:
            files.update({rung_file(i, name): text for name, text in steps.files.items()})
        pool = tpu_pool_name(steps.files[blueprint.BLUEPRINT_FILE])
        rows.append(
            {
                "rung": str(rung),
                "creates": (
                    f"TPU pool {pool} of {on.cluster_nodepool_count} x {on.tpu_type} on "
                    f"{rung.mode} capacity in {rung.zone}"
                    + (f" (reservation {on.reservation})" if on.reservation else "")
                    + (
                        ", replacing the previous rung's pool (a new name: a new pool)"
                        if i > 1
                        else ""
                    )
                ),
                "tpu_pool": pool,
                "timeout_create": capacity.POOL_CREATE_TIMEOUT,
                "stays": (
                    f"the cluster's zone {ladder.cluster_zone(on)}: its node_locations, the "
                    "system pool and cpu-np (the Pathways head and client) are not moved"
                ),
                "cross_zone": (
                    ladder.cross_zone_text(ladder.cluster_zone(on), rung.zone)
                    if rung.zone != ladder.cluster_zone(on)
                    else None
                ),
                "waits_s": ladder.wait_s(on),  # for the slice, before the next rung
                "blueprint_edits": capacity.describe_edits(on),
                "node_selector": capacity.node_selector(on),
                "files": [rung_file(i, name) for name in steps.files],
                "argv": steps.deploy,
            }
        )
    return rows, files


def tpu_pool_name(blueprint_yaml: str) -> str:
    """The TPU pool's name in an edited blueprint."""
    bp = yaml.safe_load(blueprint_yaml)
    (pool,) = [
        m
        for g in bp["deployment_groups"]
        for m in g.get("modules") or []
        if m.get("source") == blueprint.NODE_POOL_SOURCE
    ]
    return str(pool["settings"]["name"])
