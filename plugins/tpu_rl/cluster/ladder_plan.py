"""What each rung of the capacity ladder creates, for `make plan`: the rung's TPU pool edits, the
node label its TPU pods select, how long it waits for the slice, and the blueprint and
deployment file its `gcluster deploy` uses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
        rows.append(
            {
                "rung": str(rung),
                "creates": (
                    f"TPU pool of {on.cluster_nodepool_count} x {on.tpu_type} on {rung.mode} "
                    f"capacity in {rung.zone}"
                    + (f" (reservation {on.reservation})" if on.reservation else "")
                    + (", replacing the previous rung's pool" if i > 1 else "")
                ),
                "waits_s": ladder.wait_s(on),  # for the slice, before the next rung
                "blueprint_edits": capacity.describe_edits(on),
                "node_selector": capacity.node_selector(on),
                "files": [rung_file(i, name) for name in steps.files],
                "argv": steps.deploy,
            }
        )
    return rows, files
