"""The OpenLineage provider's operator API for the steps that read or write a model or data: what
each read and wrote, from what it found while it ran, and our run facets (tpu_rl.lineage;
docs/lineage.md, Emission).

The provider's listener calls `get_openlineage_facets_on_complete(task_instance)` after a step
succeeded and `get_openlineage_facets_on_failure(task_instance)` after it failed
(providers/openlineage extractors/base.py, DefaultExtractor; 2.20.3), in the task's process,
only when a transport is configured (conf.py is_disabled): so nothing here runs, reads storage
or imports OpenLineage when lineage is off, and the package works without the provider. There
is no `get_openlineage_facets_on_start`: the provider calls it with nothing (`method()`) before
pre_execute, when the run's settings are not loaded yet; the START event carries the
provider's own facets (the Airflow run, its parent DAG run).

A failed step names what it read, never what it was writing. An exception here is the
provider's to log (`_get_openlineage_facets` logs a warning and sends the event without our
part): lineage never fails a step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tpu_rl.operators.run_step import RunStep

if TYPE_CHECKING:
    from tpu_rl.layout import RunLayout
    from tpu_rl.lineage.graph import StepLineage


class EmitsLineage(RunStep):
    """A step whose OpenLineage events name the datasets it read and wrote (`step_lineage`)
    and carry our run facets (`lineage_facets`), both from what it found while it ran."""

    def step_lineage(self, layout: RunLayout) -> StepLineage | None:
        """What the step read and wrote; None: no dataset (a step that only reports)."""
        return None

    def lineage_facets(self, layout: RunLayout) -> dict[str, dict[str, Any]]:
        """Our run facets of the step's event, by their key (tpu_rl.lineage.facets.KEYS)."""
        return {}

    @staticmethod
    def tpu_facets(
        layout: RunLayout,
        digests: Mapping[str, str] | None = None,
        cost: Mapping[str, Any] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """The TPU facet of the run's settings: its images by role, each with its digest when
        its reference pins one or `digests` (reference -> digest: the pods' imageID) has it;
        the chip-hours and cost of `cost` (tpu_rl.report.billing's count) when counted."""
        from tpu_rl.lineage.facets import KEYS, TPU, tpu_run_facet
        from tpu_rl.settings.images import IMAGE_ROLES

        s, ran = layout.settings, digests or {}
        images = {role: getattr(s, name) for name, role in IMAGE_ROLES.items()}
        facet = tpu_run_facet(
            tpu_type=s.tpu_type,
            topology=s.topology,
            slices=s.cluster_nodepool_count,
            capacity=s.capacity,
            zone=s.zone,
            images=images,
            digests={role: ran[ref] for role, ref in images.items() if ref in ran},
            chip_hours=(cost or {}).get("chip_hours"),
            cost_usd=(cost or {}).get("estimated_cost_usd"),
        )
        return {KEYS[TPU]: facet}

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return self.operator_lineage(succeeded=True)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        return self.operator_lineage(succeeded=False)

    def operator_lineage(self, *, succeeded: bool) -> Any:
        """The provider's OperatorLineage of this try; None before the run's settings were
        loaded (a step that failed on them read nothing)."""
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import Dataset

        if self._layout is None:
            return None
        layout = self._layout[1]
        found = self.step_lineage(layout)
        inputs = found.inputs if found else ()
        outputs = found.outputs if found and succeeded else ()
        return OperatorLineage(
            inputs=[Dataset(namespace=d.namespace, name=d.name) for d in inputs],
            outputs=[Dataset(namespace=d.namespace, name=d.name) for d in outputs],
            run_facets=self.lineage_facets(layout),
        )
