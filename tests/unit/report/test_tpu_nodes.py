"""tpu_rl.report.tpu_nodes: the TPU nodes' lives from the steps' looks, within the run's span."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from tpu_rl.report.tpu_nodes import look, merged, node_seconds, node_selector


def looked(at: float, **nodes: float) -> dict:
    return {"at": at, "nodes": nodes}


def test_a_node_lives_from_its_creation_to_the_first_look_without_it():
    looks = [looked(100, a=50), looked(200, a=50), looked(300)]
    assert node_seconds(looks, 0, 1000) == 300 - 50


def test_a_node_still_there_at_the_last_look_counts_to_until_and_nothing_before_start():
    looks = [looked(100, a=50, b=90)]
    assert node_seconds(looks, 60, 400) == (400 - 60) + (400 - 90)


def test_a_node_recreated_under_its_name_is_a_second_life():
    looks = [looked(100, a=50), looked(200, a=150), looked(300)]
    assert node_seconds(looks, 0, 1000) == (200 - 50) + (300 - 150)


def test_every_tasks_looks_merge_in_time_order():
    assert merged([[looked(3), looked(1)], None, [looked(2)]]) == [looked(1), looked(2), looked(3)]


def test_a_look_lists_the_slices_nodes_with_their_creation_times():
    created = datetime(2026, 1, 1, tzinfo=UTC)
    node = SimpleNamespace(metadata=SimpleNamespace(name="n1", creation_timestamp=created))
    selectors: list[str] = []

    def list_node(label_selector: str) -> SimpleNamespace:
        selectors.append(label_selector)
        return SimpleNamespace(items=[node])

    seen = look(SimpleNamespace(list_node=list_node), "v6e-32", "4x8")
    assert seen["nodes"] == {"n1": created.timestamp()}
    assert selectors == [node_selector("v6e-32", "4x8")]
    assert selectors[0] == (
        "cloud.google.com/gke-tpu-accelerator=tpu-v6e-slice,cloud.google.com/gke-tpu-topology=4x8"
    )
