"""The rules of a run's TPU cell: the slice's type, topology and machine type (GKE's and xpk's
shapes, tpu_rl.tpu), MaxText's trainer and sampler slice counts, and the catalogue's word on a
model and TPU type it has no cell for (a warning)."""

from __future__ import annotations

from collections.abc import Iterator

from tpu_rl.catalogue.cells import cells_of, find_cell
from tpu_rl.settings.fields import RunSettings
from tpu_rl.tpu import CHIPS_PER_HOST, GENERATIONS, MAX_SLICE_CHIPS, generation_of


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
    if s.chips > (most := MAX_SLICE_CHIPS[generation.name]):
        yield (
            f"topology: {s.topology} ({s.chips} chips) is larger than any {generation.name} slice "
            f"(at most {most} chips, tpu_rl.tpu.MAX_SLICE_CHIPS): choose a smaller topology and "
            "tpu_type, or several slices (cluster_nodepool_count)"
        )
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


# the fix of every slice count but one slice's (MaxText 0.2.4 meshes no trainer and sampler slices)
ONE_SLICE = (
    "run on one slice: set cluster_nodepool_count 1 and num_trainer_slices and "
    "num_samplers_slices -1"
)


def slice_counts(s: RunSettings) -> Iterator[str]:
    """MaxText's trainer and sampler slices (maxtext-v0.2.4 src/maxtext/utils/
    model_creation_utils.py:671-748): both -1 (one slice, split by the device fractions) or both
    positive (whole slices each, the trainer's first), at most the slices there are. With several
    slices both must be set: the single-slice split (671-690) cuts one device list by the
    fractions, whatever slice each device is on.

    Both positive, MaxText 0.2.4 builds no mesh (its own code, run by the MaxText judge tier,
    tests/maxtext): RLConfig sets num_slices to -1 whenever trainer slices are given
    (src/maxtext/configs/types.py:4653), the trainer's and sampler's rebuilt configs keep it
    (model_creation_utils.py:724-742: their `num_slices` keyword is overwritten by the same
    validator), and create_device_mesh takes len(devices) // num_slices as the devices per slice
    (utils/maxtext_utils.py:2183), so fill_unspecified_mesh_axes asserts on the trainer's mesh
    whatever its axes (utils/max_utils.py:464-482), once both slices are up, unless the per-slice
    checks of the rebuild refuse first (model_creation_utils.py:709-722). Expert parallelism
    would fail next: the per-slice rebuild keeps ici_expert_parallelism while it sets fsdp to fill
    the slice (model_creation_utils.py:709-732)."""
    trainer, sampler = s.num_trainer_slices, s.num_samplers_slices
    if (trainer == -1) != (sampler == -1) or 0 in (trainer, sampler):
        yield (
            f"num_trainer_slices: {trainer} with num_samplers_slices {sampler}: MaxText takes "
            f"both -1 or both positive, and builds no mesh on positive ones; {ONE_SLICE}"
        )
    elif trainer > 0 and trainer + sampler > s.cluster_nodepool_count:
        yield (
            f"num_trainer_slices: {trainer} + num_samplers_slices {sampler} need "
            f"{trainer + sampler} slices, the run has {s.cluster_nodepool_count} "
            f"(MaxText: 'Not enough slices for trainer and samplers'); {ONE_SLICE}"
        )
    elif trainer > 0:
        devices = s.slices.devices_per_slice * trainer if generation_of(s.tpu_type) else 0
        expert = s.ici_expert_parallelism
        # with no axis -1 the product check fails (479); an axis -1 fails its fill (464, 471)
        assertion = (
            f": 'Number of devices per slice -{devices} does not match the product of the ICI "
            "parallelism'"
            if -1 not in (s.ici_tensor_parallelism, expert)
            else ""
        )
        yield (
            f"num_trainer_slices: {trainer} with num_samplers_slices {sampler}: MaxText 0.2.4 "
            "builds no mesh on trainer and sampler slices: its RLConfig sets num_slices -1 "
            "whenever they are given (configs/types.py:4653), create_device_mesh divides the "
            "trainer's devices by it (maxtext_utils.py:2183) and fill_unspecified_mesh_axes "
            f"asserts (max_utils.py:464-482{assertion}), whatever the mesh"
            + (
                f" (and ici_expert_parallelism {expert} would fail next: the per-slice rebuild "
                "keeps it, model_creation_utils.py:709-732)"
                if expert != 1
                else ""
            )
            + f"; {ONE_SLICE}"
        )
    elif trainer == -1 and s.cluster_nodepool_count > 1:
        yield (
            f"num_trainer_slices: -1 with {s.cluster_nodepool_count} slices: MaxText would split "
            "one device list across slices by the fractions, its trainer mesh spanning the "
            f"data-centre network; {ONE_SLICE}"
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
