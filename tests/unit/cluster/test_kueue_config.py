"""The blueprint's Kueue configuration edited to admit the Pathways backend
(tpu_rl.cluster.kueue_config): one group covering TPU, cpu and memory, a cpu-np flavor."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from sandbox.paths import BLUEPRINT_FIXTURES
from tpu_rl.backend import jobset as pathways_jobset
from tpu_rl.backend import kueue
from tpu_rl.cluster import kueue_config
from tpu_rl.cluster.blueprint import BlueprintError
from tpu_rl.cluster.kueue_config import edit_kueue_config
from tpu_rl.settings.run_settings import load_settings

TEMPLATE = (BLUEPRINT_FIXTURES / "kueue-configuration.yaml.tftpl").read_text()


def render(template: str, **values: Any) -> list[dict]:
    """terraform's templatefile, for the template's ${name} variables."""
    text = re.sub(r"\$\{(\w+)\}", lambda m: str(values[m.group(1)]), template)
    return [d for d in yaml.safe_load_all(text) if d]


def test_the_blueprints_kueue_template_covers_only_tpus_and_our_edit_covers_the_backend(layout):
    values = {"tpu_quota": 32, "accelerator_type": "tpu-v6e-slice", "namespace": "default"}
    (before,) = [d for d in render(TEMPLATE, **values) if d["kind"] == "ClusterQueue"]
    assert kueue.covered_resources(before) == {"google.com/tpu"}
    edited = render(edit_kueue_config(TEMPLATE), **values)
    (queue,) = [d for d in edited if d["kind"] == "ClusterQueue"]
    assert kueue.requested_resources(
        pathways_jobset.backend_jobset(layout)
    ) <= kueue.covered_resources(queue)
    (group,) = queue["spec"]["resourceGroups"]
    for flavor in group["flavors"]:  # Kueue wants a quota of every covered resource per flavor
        assert {r["name"] for r in flavor["resources"]} == set(group["coveredResources"])
    flavors = {d["metadata"]["name"]: d for d in edited if d["kind"] == "ResourceFlavor"}
    assert [f["name"] for f in group["flavors"]] == ["tpuv6e-flavor", "pathways-flavor"]
    assert flavors["pathways-flavor"]["spec"]["nodeLabels"] == {
        "cloud.google.com/gke-nodepool": "cpu-np"
    }
    assert flavors["tpuv6e-flavor"]["spec"]["nodeLabels"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice"
    }
    # everything else of the template is kept, and editing again changes nothing
    assert [d["kind"] for d in edited].count("PriorityClass") == 5
    assert edit_kueue_config(edit_kueue_config(TEMPLATE)) == edit_kueue_config(TEMPLATE)


def test_a_template_without_a_tpu_group_is_refused():
    queue = {"kind": "ClusterQueue", "spec": {"resourceGroups": [{"coveredResources": ["cpu"]}]}}
    with pytest.raises(BlueprintError, match=r"no ClusterQueue group covers google\.com/tpu"):
        edit_kueue_config(yaml.safe_dump(queue))


def test_a_group_keeps_its_quotas_and_gets_the_pathways_flavor_once():
    group = {
        "coveredResources": ["google.com/tpu", "cpu"],
        "flavors": [{"name": "tpu", "resources": [{"name": "cpu", "nominalQuota": 7}]}],
    }
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue"}
    template = yaml.safe_dump({**queue, "spec": {"resourceGroups": [group]}})
    edited = list(yaml.safe_load_all(edit_kueue_config(template)))
    assert [d["kind"] for d in edited] == ["ResourceFlavor", "ClusterQueue"]
    assert edited[0]["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    (edited_group,) = edited[1]["spec"]["resourceGroups"]
    assert edited_group["coveredResources"] == ["google.com/tpu", "cpu", "memory"]
    tpu, pathways = edited_group["flavors"]
    assert tpu["resources"] == [
        {"name": "cpu", "nominalQuota": 7},  # the template's own quota is kept
        {"name": "memory", "nominalQuota": kueue_config.TPU_FLAVOR_MEMORY_QUOTA},
    ]
    assert pathways == kueue_config.pathways_resource_group_flavor()


def test_the_pathways_group_holds_every_chip_of_the_pool(tutorial_conf):
    settings = load_settings(tutorial_conf)
    group = kueue_config.pathways_resource_group(settings)
    assert group["coveredResources"] == ["google.com/tpu", "cpu", "memory"]
    tpu, head = group["flavors"]
    assert tpu["name"] == kueue_config.TPU_FLAVOR
    assert tpu["resources"][0] == {"name": "google.com/tpu", "nominalQuota": 32}  # v6e-32 x 1
    assert head["resources"][0] == {"name": "google.com/tpu", "nominalQuota": 0}


def test_the_tpu_flavor_selects_the_runs_generation_and_tolerates_its_taint(tutorial_conf):
    tpu, pathways = kueue_config.resource_flavors(load_settings(tutorial_conf))
    assert tpu["spec"]["nodeLabels"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice"}
    assert tpu["spec"]["tolerations"] == [
        {"effect": "NoSchedule", "key": "google.com/tpu", "value": "present"}
    ]
    assert pathways["spec"]["nodeLabels"] == {"cloud.google.com/gke-nodepool": "cpu-np"}
