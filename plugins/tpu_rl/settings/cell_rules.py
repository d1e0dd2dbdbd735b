"""The rules of a run's TPU cell: the slice's type, topology and machine type (GKE's and xpk's
shapes, tpu_rl.tpu), MaxText's trainer and sampler slice counts, and the catalogue's word on a
model and TPU type it has no cell for (a warning)."""

from __future__ import annotations

from collections.abc import Iterator

from tpu_rl.catalogue.cells import cells_of, find_cell
from tpu_rl.settings.fields import RunSettings
from tpu_rl.tpu import CHIPS_PER_HOST, GENERATIONS, generation_of


def tpu_shape(s: RunSettings) -> Iterator[str]:
    generation = generation_of(s.tpu_type)
    if generation is None:
        yield (
            f"tpu_type: {s.tpu_type!r} unknown: a type is <generation>-<TensorCores>, the "
            f"generations {', '.join(GENERATIONS)} (e.g. v6e-32, v5p-64, tpu7x-128)"
        )
    if s.compute_type not in CHIPS_PER_HOST:
        yield f"compute_type: {s.compute_type!r} unknown (known: {sorted(CHIPS_PER_HOST)})"
    if not s.chips:
        yield f"topology: {s.topology!r} must look like '4x8' or '2x2x4'"
        return
    if generation is None:
        return
    if problem := generation.topology_problem(s.topology):
        yield f"topology: {s.topology!r}: {problem}"
        return
    expected = generation.tpu_type(s.topology)
    if expected != s.tpu_type:
        yield (
            f"topology: {s.topology} ({s.chips} chips) is a {expected}, not a {s.tpu_type}: set "
            f"tpu_type={expected}, or the topology of a {s.tpu_type}"
        )
    if s.compute_type in CHIPS_PER_HOST and s.compute_type != generation.machine_type:
        yield (
            f"compute_type: {s.compute_type} is not a {generation.name} machine type: set "
            f"compute_type={generation.machine_type} (GKE's {generation.name} multi-host VM)"
        )
    per_host = CHIPS_PER_HOST.get(s.compute_type)
    if per_host and s.chips % per_host:
        yield f"topology: {s.topology} ({s.chips} chips) is not whole {s.compute_type} hosts"


def slice_counts(s: RunSettings) -> Iterator[str]:
    """MaxText's trainer and sampler slices (maxtext-v0.2.4 src/maxtext/utils/
    model_creation_utils.py:671-748): both -1 (one slice, split by the device fractions) or both
    positive (whole slices each, the trainer's first), at most the slices there are. With several
    slices both must be set: the single-slice split (671-690) cuts one device list by the
    fractions, whatever slice each device is on."""
    trainer, sampler = s.num_trainer_slices, s.num_samplers_slices
    fix = "set num_trainer_slices and num_samplers_slices both to -1 or both to 1 or more"
    if (trainer == -1) != (sampler == -1) or 0 in (trainer, sampler):
        yield (
            f"num_trainer_slices: {trainer} with num_samplers_slices {sampler}: MaxText takes "
            f"both -1 or both positive; {fix}"
        )
    elif trainer > 0 and trainer + sampler > s.cluster_nodepool_count:
        yield (
            f"num_trainer_slices: {trainer} + num_samplers_slices {sampler} need "
            f"{trainer + sampler} slices, the run has {s.cluster_nodepool_count} "
            "(MaxText: 'Not enough slices for trainer and samplers'); raise "
            "cluster_nodepool_count or lower them"
        )
    elif trainer == -1 and s.cluster_nodepool_count > 1:
        yield (
            f"num_trainer_slices: -1 with {s.cluster_nodepool_count} slices: MaxText would split "
            "one device list across slices by the fractions, its trainer mesh spanning the "
            f"data-centre network; give each role whole slices: {fix}"
        )


def catalogue_warnings(s: RunSettings) -> list[str]:
    """A model and TPU type the catalogue has no cell for: its mesh is the run's own."""
    if find_cell(s.model_name, s.tpu_type):
        return []
    known = ", ".join(f"{c.tpu_type} ({c.topology})" for c in cells_of(s.model_name))
    where = f"its cells: {known}" if known else "the catalogue has no cell of this model"
    return [
        f"model_name: {s.model_name} on {s.tpu_type} is not a catalogue cell ({where}); its mesh "
        "passed MaxText's rules here but no public run is known to have used it "
        "(docs/catalogue.md: adding a cell)"
    ]


CELL_RULES = (tpu_shape, slice_counts)
