"""The catalogue's cells: every cell renders with `make plan`'s code and validates,
its shapes follow the cell's TPU generation, the tutorial's cell is the settings' defaults, and a
bad mesh or slice count is refused with MaxText's rule and the fix."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.support.cells import cell_conf
from tpu_rl.catalogue.cells import CELLS, TUTORIAL_CELL, cells_of
from tpu_rl.plan import main as plan
from tpu_rl.settings.cell_defaults import cell_settings
from tpu_rl.settings.cell_rules import ONE_SLICE
from tpu_rl.settings.fields import RunSettings
from tpu_rl.settings.images import PATHWAYS_PROXY_SERVER_IMAGE, PATHWAYS_SERVER_IMAGE
from tpu_rl.settings.params import specs
from tpu_rl.settings.references import IMAGE_REFERENCE
from tpu_rl.settings.run_settings import SettingsError, load_settings
from tpu_rl.settings.validation import settings_warnings
from tpu_rl.tpu import chips_in, generation_of

CELL_IDS = [f"{c.model_name}@{c.tpu_type}" for c in CELLS]


def test_the_catalogue_spans_the_issues_minimum():
    assert len(CELLS) >= 8 and len({c.model_name for c in CELLS}) >= 4
    assert {generation_of(c.tpu_type).name for c in CELLS} == {"v6e", "v5p", "tpu7x"}
    assert len(set(CELL_IDS)) == len(CELL_IDS), "one cell per model and TPU type"
    for cell in CELLS:
        assert cell.follows and cell.date[:2] == "20", cell


def test_the_tutorials_cell_is_the_settings_defaults():
    defaults = RunSettings(project="p", region="r", zone="z", cluster_name="c", gcs_bucket="b")
    tutorial = cell_settings(TUTORIAL_CELL)
    assert {k: getattr(defaults, k) for k in tutorial} == tutorial


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_every_cell_renders_and_its_shapes_follow_the_cell(tmp_path, cell):
    conf = tmp_path / "cell.json"
    conf.write_text(json.dumps(cell_conf(cell)))
    assert plan([str(conf), str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    settings = json.loads((out / "plan.json").read_text())["settings"]
    assert {k: settings[k] for k in cell_settings(cell)} == cell_settings(cell)
    generation = generation_of(cell.tpu_type)
    backend = yaml.safe_load((out / "start_backend.jobset.yaml").read_text())
    head, workers = backend["spec"]["replicatedJobs"]
    pod = workers["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["cloud.google.com/gke-tpu-accelerator"] == (
        generation.accelerator_label
    )
    assert pod["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == cell.topology
    limits = pod["containers"][0]["resources"]["limits"]
    assert limits["google.com/tpu"] == str(generation.chips_per_vm)
    assert generation.tpu_type(cell.topology) == cell.tpu_type
    hosts = chips_in(cell.topology) // generation.chips_per_vm
    assert workers["template"]["spec"]["parallelism"] == hosts
    rm_args = head["template"]["spec"]["template"]["spec"]
    assert f"--instance_type={generation.pathways_instance_type}:{cell.topology}" in json.dumps(
        rm_args
    )
    deployment = yaml.safe_load((out / "deployment.yaml").read_text())["vars"]
    assert (deployment["machine_type"], deployment["tpu_topology"]) == (
        generation.machine_type,
        cell.topology,
    )
    blueprint = yaml.safe_load((out / "blueprint.yaml").read_text())
    assert blueprint["vars"]["accelerator_type"] == generation.accelerator_label
    train = next(
        s for s in json.loads((out / "plan.json").read_text())["steps"] if s["id"] == "train"
    )
    per_vm = [a for a in train["argv"] if a.startswith("chips_per_vm=")]
    assert per_vm == (
        [] if generation.devices_per_vm == 4 else [f"chips_per_vm={generation.devices_per_vm}"]
    )
    template = [a for a in train["argv"] if a.startswith("chat_template_path=")]
    assert template == (
        [f"chat_template_path={cell.model.chat_template}"] if cell.model.chat_template else []
    )


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_every_cell_validates_without_a_catalogue_warning(cell):
    settings = load_settings(cell_conf(cell))
    assert not [w for w in settings_warnings(settings) if "catalogue" in w]


def test_a_model_alone_takes_its_first_cell_and_an_emptied_mesh_value_the_cells():
    conf = cell_conf(cells_of("llama3.1-70b")[0])
    del conf["tpu_type"]
    s = load_settings({**conf, "rollout_tensor_parallelism": None})
    assert (s.tpu_type, s.topology, s.compute_type) == ("v5p-128", "4x4x4", "ct5p-hightpu-4t")
    assert (s.rollout_tensor_parallelism, s.scan_layers) == (8, True)
    assert s.hf_model_path == "meta-llama/Llama-3.1-70B-Instruct"


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_a_run_of_the_dag_naming_a_model_and_tpu_type_takes_its_cell(cell):
    """Airflow gives a run every Param's default with the values it names
    (airflow.sdk.definitions.param.process_params): the cell's settings start empty in the form,
    so the cell fills them rather than the tutorial's."""
    form = {name: spec["default"] for name, spec in specs().items()}
    settings = load_settings({**form, **cell_conf(cell)})
    assert {k: getattr(settings, k) for k in cell_settings(cell)} == cell_settings(cell)


def errors(conf: dict) -> list[str]:
    with pytest.raises(SettingsError) as raised:
        load_settings(conf)
    return raised.value.errors


def cell_of(model_name: str, tpu_type: str):
    return next(c for c in cells_of(model_name) if c.tpu_type == tpu_type)


def test_tpu7x_counts_two_devices_a_chip():
    """tpu7x-128: 64 chips, 128 JAX devices, 64 each for trainer and sampler (run_qwen3_30b_rl.sh's
    rollout 16 x 4); a mesh sized for 64 chips split in two (32) is refused with the fix."""
    conf = cell_conf(cell_of("qwen3-30b-a3b-base", "tpu7x-128"))
    assert load_settings({**conf, "ici_fsdp_parallelism": 64}).chips == 64
    [problem] = errors({**conf, "ici_fsdp_parallelism": 32})
    assert problem == (
        "ici_*_parallelism: tensor x expert x fsdp = 32 does not fit the trainer's 64 devices on "
        "tpu7x-128 (MaxText: the mesh's product must equal the devices per slice); make the "
        "product 64, or one axis -1 and the others' product divide 64"
    )


def test_one_vm_shares_its_devices_between_trainer_and_sampler():
    """v5p-8 is one VM: MaxText splits by the fractions only across 2 VMs or more, so the trainer
    mesh must fill all 4 chips, and the fractions' halves (2) are not the trainer's."""
    conf = cell_conf(cell_of("llama3.1-8b", "v5p-8"))
    assert load_settings({**conf, "ici_fsdp_parallelism": 4}).chips == 4
    [problem] = errors({**conf, "ici_fsdp_parallelism": 2})
    assert "does not fit the trainer's 4 devices on v5p-8" in problem


def test_a_sampler_mesh_that_does_not_divide_is_refused_with_the_fix():
    conf = cell_conf(cell_of("gpt-oss-20b", "v5p-64"))
    [problem] = errors({**conf, "rollout_tensor_parallelism": 12})
    assert problem == (
        "rollout_tensor_parallelism x rollout_expert_parallelism = 12 does not divide the "
        "sampler's 16 devices on v5p-64 (MaxText: num_sampler_devices must be divisible by "
        "them); make their product divide 16"
    )


def test_a_v5p_topology_gke_has_not_and_a_type_that_does_not_match_are_refused():
    conf = cell_conf(cell_of("qwen3-30b-a3b-base", "v5p-32"))
    assert any("v5p slices are 2x2x1" in e for e in errors({**conf, "topology": "2x3x4"}))
    assert errors({**conf, "topology": "2x4x4"}) == [
        "topology: 2x4x4 (32 chips) is a v5p-64, not a v5p-32: set tpu_type=v5p-64, or the "
        "topology of a v5p-32"
    ]
    assert any(
        "compute_type: ct6e-standard-4t is not a v5p machine type" in e
        for e in errors({**conf, "compute_type": "ct6e-standard-4t"})
    )


def test_multi_slice_counts_are_refused_with_the_one_slice_fix():
    """MaxText 0.2.4 builds no mesh on trainer and sampler slices (cell_rules.slice_counts; the
    MaxText tier, tests/maxtext, runs its assertion), and one device list is not cut across
    slices: every count but one slice's is refused, saying to run on one slice."""
    two = {**cell_conf(TUTORIAL_CELL), "cluster_nodepool_count": 2}
    roles = {**two, "num_trainer_slices": 1, "num_samplers_slices": 1}
    for conf in (two, roles, {**roles, "ici_expert_parallelism": 1}):
        problems = errors(conf)
        assert problems and all(p.endswith(ONE_SLICE) for p in problems), problems
    [refused] = errors(roles)
    assert "builds no mesh on trainer and sampler slices" in refused
    assert "ici_expert_parallelism 4 would fail next" in refused
    # one trainer slice's mesh is the slice's 32 devices, not half of them
    bad = {**roles, "ici_expert_parallelism": 1, "ici_fsdp_parallelism": 2}
    assert any("does not fit the trainer's 32 devices" in e for e in errors(bad))
    assert any(
        "Not enough slices" in e
        for e in errors({**two, "num_trainer_slices": 2, "num_samplers_slices": 1})
    )


def test_a_model_on_a_tpu_the_catalogue_has_no_cell_for_warns():
    conf = {**cell_conf(cell_of("llama3.1-8b", "v6e-8")), "tpu_type": "v6e-16", "topology": "4x4"}
    [warning] = [w for w in settings_warnings(load_settings(conf)) if "catalogue" in w]
    assert warning.startswith(
        "model_name: llama3.1-8b on v6e-16 is not a catalogue cell (its cells: v6e-8 (2x4), "
        "v5p-8 (2x2x1))"
    )


def test_a_cells_known_good_images_are_the_digests_its_source_pins():
    """The known-good image digests per cell: only run_gemma4_e4b_rl.sh (lines 28-29 at
    maxtext-v0.2.4) pins images by digest, the Pathways server and proxy every run pulls by
    default; no source publishes a digest of the MaxText image (cells.py,
    Cell.known_good_images)."""
    for cell in CELLS:
        assert bool(cell.known_good_images) == bool(cell.images_source), cell
        for image in cell.known_good_images:
            match = IMAGE_REFERENCE.fullmatch(image)
            assert match and match.group("digest"), image
    pinned = {c.model_name: c.known_good_images for c in CELLS if c.known_good_images}
    assert pinned == {"gemma4-e4b": (PATHWAYS_SERVER_IMAGE, PATHWAYS_PROXY_SERVER_IMAGE)}
