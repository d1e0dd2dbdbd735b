"""Which datasets each step of one run reads and writes, the champion's provenance chain through
them (base model -> dataset -> run -> step -> evaluation -> export -> approval -> registry
version), and the limits an event must keep for Dataplex (docs/lineage.md, The graph).

Dataplex's Data Lineage API takes OpenLineage run events, with these limits
(https://cloud.google.com/data-catalog/docs/how-to/open-lineage, Limitations): no DatasetEvent
or JobEvent; "Maximum size of a single message is 5 MB"; "Length of each Fully Qualified Name in
inputs and outputs is limited to 4000 characters"; "Links are grouped by events with 100 links.
The maximum aggregate number of links is 1000." A link joins one input to one output
(https://docs.cloud.google.com/dataplex/docs/openlineage-mapping: LineageEvent.EventLinks.source
the inputs, .target the outputs), so an event of m inputs and n outputs makes m x n; each event
here keeps to 100 of them.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tpu_rl.lineage.names import (
    FQN_LIMIT,
    DatasetId,
    RunPaths,
    base_model,
    champion_record,
    checkpoint_step,
    converted_checkpoint,
    export_folder,
    gcs_dataset,
    heldout_results,
    training_data,
    vertex_model_version,
)
from tpu_rl.names import Step

MAX_LINKS = 100
MAX_EVENT_BYTES = 5_000_000  # "5 MB", read as the smaller of 5 x 10^6 and 5 x 2^20 bytes


@dataclass(frozen=True)
class StepLineage:
    """What one step reads and what it writes."""

    inputs: tuple[DatasetId, ...]
    outputs: tuple[DatasetId, ...]

    @property
    def links(self) -> int:
        """Dataplex's links of the step's event: one from each input to each output."""
        return len(self.inputs) * len(self.outputs)


@dataclass(frozen=True)
class RunDatasets:
    """The datasets of one run its provenance runs through."""

    base_model: DatasetId
    training_data: DatasetId
    converted: DatasetId
    committed: tuple[DatasetId, ...]  # the committed checkpoint steps, ascending
    exported: DatasetId  # the step export exported
    export: DatasetId
    champion: DatasetId  # the champion record
    scored: tuple[DatasetId, ...] = ()  # the steps the held-out evaluation scored
    heldout: DatasetId | None = None  # its results (None: the run had none)
    champion_checkpoint: DatasetId | None = None  # the champion it was scored against
    version: DatasetId | None = None  # the Vertex AI version (None: none registered)


def run_datasets(
    run: RunPaths,
    *,
    committed: Sequence[int],
    exported: int,
    scored: Sequence[int] = (),
    champion_checkpoint: str | None = None,
    registry_version: str | None = None,
) -> RunDatasets:
    """The run's datasets from its layout and what its steps found: `committed`, the steps
    Orbax committed; `exported`, export's step; `scored`, the steps the held-out evaluation
    scored (empty: it was off); `champion_checkpoint`, the checkpoint_uri of the champion record
    it scored against; `registry_version`, the version promote registered."""
    return RunDatasets(
        base_model=base_model(run),
        training_data=training_data(run),
        converted=converted_checkpoint(run),
        committed=tuple(checkpoint_step(run, step) for step in sorted(committed)),
        exported=checkpoint_step(run, exported),
        export=export_folder(run),
        champion=champion_record(run),
        scored=tuple(checkpoint_step(run, step) for step in sorted(scored)),
        heldout=heldout_results(run) if scored else None,
        champion_checkpoint=gcs_dataset(champion_checkpoint) if champion_checkpoint else None,
        version=vertex_model_version(registry_version) if registry_version else None,
    )


def _present(*datasets: DatasetId | None) -> tuple[DatasetId, ...]:
    return tuple(dataset for dataset in datasets if dataset is not None)


def written_steps(
    committed: Sequence[DatasetId], needed: Collection[DatasetId], inputs: int
) -> tuple[DatasetId, ...]:
    """The committed steps training's event names within MAX_LINKS with `inputs` inputs: every
    one later steps read (`needed`: scored, exported), then the newest others; in the order of
    `committed`. ValueError when the needed alone are too many."""
    room = MAX_LINKS // inputs
    kept = {step for step in committed if step in needed}
    if len(kept) > room:
        raise ValueError(
            f"{len(kept)} checkpoint steps are read after training, more than the {room} an "
            f"event of {inputs} inputs may name within Dataplex's {MAX_LINKS} links"
        )
    others = [step for step in reversed(committed) if step not in kept]
    kept.update(others[: room - len(kept)])
    return tuple(step for step in committed if step in kept)


def convert_lineage(base: DatasetId, converted: DatasetId) -> StepLineage:
    """convert: the Hugging Face model at its revision -> the converted checkpoint."""
    return StepLineage((base,), (converted,))


def training_lineage(
    converted: DatasetId,
    data: DatasetId,
    committed: Sequence[DatasetId],
    needed: Collection[DatasetId] = (),
) -> StepLineage:
    """Training (wait_for_rewards, the step that knows when it ended): the converted checkpoint
    and the dataset -> the committed checkpoint steps within the links (written_steps)."""
    inputs = (converted, data)
    return StepLineage(inputs, written_steps(committed, needed, len(inputs)))


def heldout_lineage(
    scored: Sequence[DatasetId],
    base: DatasetId,
    champion: DatasetId | None,
    results: DatasetId,
) -> StepLineage:
    """evaluate_heldout: the scored steps, the base model (the converted checkpoint) and the
    champion's checkpoint (when the deployment has one) -> the held-out results."""
    return StepLineage((*scored, base, *_present(champion)), (results,))


def export_lineage(
    exported: DatasetId, heldout: DatasetId | None, export: DatasetId
) -> StepLineage:
    """export: the exported step, and the held-out results that chose it when there are some
    (checkpoint_choice.choose_for_run takes their step) -> the export."""
    return StepLineage((exported, *_present(heldout)), (export,))


def promote_lineage(
    export: DatasetId, champion: DatasetId, version: DatasetId | None
) -> StepLineage:
    """promote: the export -> the champion record, and the Vertex AI version when registered."""
    return StepLineage((export,), (champion, *_present(version)))


def run_lineage(datasets: RunDatasets) -> dict[Step, StepLineage]:
    """What each step of the run that reads or writes a model or data reads and writes (each
    step's rule above; evaluate_heldout only when the run had it)."""
    d = datasets
    lineage = {
        Step.CONVERT: convert_lineage(d.base_model, d.converted),
        Step.WAIT_FOR_REWARDS: training_lineage(
            d.converted, d.training_data, d.committed, {d.exported, *d.scored}
        ),
        Step.EXPORT: export_lineage(d.exported, d.heldout, d.export),
        Step.PROMOTE: promote_lineage(d.export, d.champion, d.version),
    }
    if d.heldout is not None:
        lineage[Step.EVALUATE_HELDOUT] = heldout_lineage(
            d.scored, d.converted, d.champion_checkpoint, d.heldout
        )
    return lineage


@dataclass(frozen=True)
class ChainLink:
    """One link of the provenance chain: what a person reads, the step it comes from, and the
    dataset it names (None: the step's run itself, the training run, or the trainer's own
    evaluation, which that run's evaluation facet carries)."""

    label: str
    step: Step
    dataset: DatasetId | None


@dataclass(frozen=True)
class _Joins:
    """A link and what joins it to the chain: what its step must read, what it must write."""

    link: ChainLink
    reads: tuple[DatasetId, ...] = ()
    writes: tuple[DatasetId, ...] = ()


def _joins(d: RunDatasets) -> list[_Joins]:
    """The chain's links in order; each reads what a link before it wrote (the dataset is read
    beside the converted model, by the same run)."""
    trainer = Step.WAIT_FOR_REWARDS
    if d.heldout is not None:
        heldout = ChainLink("evaluation", Step.EVALUATE_HELDOUT, d.heldout)
        evaluation = _Joins(heldout, reads=(d.exported,), writes=(d.heldout,))
    else:
        evaluation = _Joins(ChainLink("evaluation", trainer, None))
    joins = [
        _Joins(
            ChainLink("base model", Step.CONVERT, d.base_model),
            reads=(d.base_model,),
            writes=(d.converted,),
        ),
        _Joins(ChainLink("dataset", trainer, d.training_data), reads=(d.training_data,)),
        _Joins(ChainLink("run", trainer, None), reads=(d.converted,)),
        _Joins(ChainLink("step", trainer, d.exported), writes=(d.exported,)),
        evaluation,
        _Joins(
            ChainLink("export", Step.EXPORT, d.export),
            reads=(d.exported, *_present(d.heldout)),
            writes=(d.export,),
        ),
        _Joins(
            ChainLink("approval", Step.PROMOTE, d.champion), reads=(d.export,), writes=(d.champion,)
        ),
    ]
    if d.version is not None:
        version = ChainLink("registry version", Step.PROMOTE, d.version)
        joins.append(_Joins(version, writes=(d.version,)))
    return joins


def provenance_chain(lineage: Mapping[Step, StepLineage], datasets: RunDatasets) -> list[ChainLink]:
    """The champion's provenance, in order: base model, dataset, run, step, evaluation, export,
    approval (promote, which runs once approve lets it, and the record it writes), registry
    version (when the deployment registers one). Each link must be joined to the chain by the
    steps' lineage: a ValueError names the first that is not, and what it misses."""
    joins = _joins(datasets)
    for join in joins:
        link = join.link
        found = lineage.get(link.step)
        if found is None:
            raise ValueError(
                f"provenance chain broken at {link.label!r}: no lineage of {link.step}"
            )
        for wanted, have, verb in (
            (join.reads, found.inputs, "read"),
            (join.writes, found.outputs, "write"),
        ):
            if missing := [dataset.fqn for dataset in wanted if dataset not in have]:
                raise ValueError(
                    f"provenance chain broken at {link.label!r}: {link.step} does not {verb} "
                    f"{', '.join(missing)}"
                )
    return [join.link for join in joins]


@dataclass(frozen=True)
class EventSize:
    """An event's JSON size in bytes and its Dataplex links."""

    size: int
    links: int


def check_event(event: Mapping[str, Any]) -> EventSize:
    """The size and links of an OpenLineage event (as JSON would carry it); ValueError when
    Dataplex would refuse it: not a run event, over MAX_EVENT_BYTES, over MAX_LINKS, an input's
    or output's FQN over FQN_LIMIT, or a value JSON cannot carry (NaN, infinity)."""
    if not {"eventType", "run", "job"} <= event.keys():
        raise ValueError("not a run event (eventType, run and job): Dataplex takes run events only")
    try:
        size = len(json.dumps(event, allow_nan=False).encode())
    except ValueError as err:  # NaN or infinity: not JSON
        raise ValueError(f"the event is not JSON an OpenLineage consumer reads: {err}") from None
    if size > MAX_EVENT_BYTES:
        raise ValueError(f"event of {size:,} bytes: Dataplex takes {MAX_EVENT_BYTES:,} at most")
    inputs, outputs = event.get("inputs") or [], event.get("outputs") or []
    links = len(inputs) * len(outputs)
    if links > MAX_LINKS:
        raise ValueError(
            f"event of {len(inputs)} inputs x {len(outputs)} outputs = {links} links: Dataplex "
            f"groups {MAX_LINKS} to an event"
        )
    for dataset in (*inputs, *outputs):
        fqn = DatasetId(dataset["namespace"], dataset["name"]).fqn
        if len(fqn) > FQN_LIMIT:
            raise ValueError(f"FQN of {len(fqn):,} characters (at most {FQN_LIMIT}): {fqn[:80]}...")
    return EventSize(size, links)
