"""Kueue's Workloads read without I/O (tpu_rl.kube.kueue_rules): whose a Workload is, and
whether Kueue can ever admit it."""

from __future__ import annotations

import pytest

from tests.support.kueue import UNCOVERED, workload
from tpu_rl.kube import kueue_rules


@pytest.mark.parametrize(
    ("reason", "message", "never"),
    [
        ("Pending", UNCOVERED, True),
        ("Inadmissible", "ClusterQueue cluster-queue is inactive", True),
        (
            "Pending",
            "couldn't assign flavors to pod set worker: insufficient quota for google.com/tpu "
            "in flavor tpuv6e-flavor, request > maximum capacity (64 > 32)",
            True,
        ),
        (
            "Pending",
            "couldn't assign flavors to pod set worker: insufficient unused quota for "
            "google.com/tpu in flavor tpuv6e-flavor, 32 more needed",
            False,  # another run holds the TPUs: waiting is right
        ),
    ],
)
def test_only_a_workload_that_can_never_be_admitted_ends_the_wait(reason, message, never):
    assert (kueue_rules.never_admitted(workload("b", reason, message)) == message) is never


def test_a_condition_that_is_true_or_of_another_type_says_nothing():
    admitted = workload("b", "Inadmissible", UNCOVERED)
    admitted["status"]["conditions"][0]["status"] = "True"
    assert kueue_rules.never_admitted(admitted) is None
    evicted = workload("b", "Inadmissible", UNCOVERED)
    evicted["status"]["conditions"][0]["type"] = "Evicted"
    assert kueue_rules.never_admitted(evicted) is None
    assert kueue_rules.never_admitted({}) is None


def test_an_inadmissible_workload_without_a_message_gives_its_reason():
    assert kueue_rules.never_admitted(workload("b", "Inadmissible", "")) == "Inadmissible"


def test_the_workload_of_an_object_is_the_one_it_owns():
    mine, other = workload("mine", "Pending", "x"), workload("other", "Pending", "x")
    assert kueue_rules.workload_for([other, mine], "JobSet", "mine") is mine
    assert kueue_rules.workload_for([other, mine], "Job", "mine") is None
    assert kueue_rules.workload_for([{"metadata": None}, {}], "JobSet", "mine") is None


def test_the_workloads_path_is_the_namespaces_in_kueues_api():
    assert (
        kueue_rules.workloads_path("ns") == "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads"
    )
