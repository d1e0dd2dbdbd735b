"""The sweep against the Kubernetes API emulator: every kind of the table, picked by labels,
deleted as the table says (a Job with its pods), and a kind added to the table swept with no
other change."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import kubernetes
import pytest

from sandbox.kube_emulator import KubeEmulator, running_emulator
from tpu_rl.kube import swept
from tpu_rl.kube.swept import SWEPT_KINDS, SweptKind, sweep

NS = "default"


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    with running_emulator(token="t-1") as emulator:
        yield emulator


def client(emu: KubeEmulator) -> kubernetes.client.ApiClient:
    """As the google provider's GKE hooks configure it: host, CA file, bearer api_key."""
    config = kubernetes.client.Configuration(
        host=emu.url, api_key={"authorization": f"Bearer {emu.token}"}
    )
    config.ssl_ca_cert = emu.ca_file
    return kubernetes.client.ApiClient(config)


def meta(name: str, run: str, owner: dict | None = None) -> dict:
    found = {"name": name, "namespace": NS, "labels": {"run": run}}
    return {**found, "ownerReferences": [owner]} if owner else found


def run_objects(emu: KubeEmulator, run: str) -> None:
    """A run's JobSet, Job (with a pod not yet scheduled) and Secret, labelled run=<run>."""
    emu.create(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": meta(f"backend-{run}", run),
            "spec": {"replicatedJobs": []},
        }
    )
    template = {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}
    job = emu.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": meta(f"train-{run}", run),
            "spec": {"template": template, "suspend": True},
        }
    )
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    emu.create(
        {"apiVersion": "v1", "kind": "Pod", "metadata": meta(f"pod-{run}", run, owner), **template}
    )
    emu.create({"apiVersion": "v1", "kind": "Secret", "metadata": meta(f"token-{run}", run)})


def names(emu: KubeEmulator, plural: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in emu.list(plural))


def test_a_sweep_deletes_every_swept_kind_with_those_labels_as_the_table_says(emu):
    run_objects(emu, "a")
    run_objects(emu, "b")
    removed, errors = sweep(client(emu), NS, "run=a")
    assert errors == []
    assert list(removed) == ["jobsets", "jobs", "secrets"]  # the table's order
    assert removed == {"jobsets": ["backend-a"], "jobs": ["train-a"], "secrets": ["token-a"]}
    for plural in ("jobsets", "jobs", "secrets"):
        assert names(emu, plural) == [n for n in names(emu, plural) if n.endswith("-b")]
    # Foreground: the Job's pod went with it (the API server's default would orphan it)
    assert names(emu, "pods") == ["pod-b"]
    assert sweep(client(emu), NS, "run=a") == ({k.plural: [] for k in SWEPT_KINDS}, [])


def test_a_kind_added_to_the_table_is_swept_with_no_other_change(emu, monkeypatch):
    """A newcomer's one-row change: ServiceAccounts too."""
    accounts = SweptKind(
        kind="ServiceAccount",
        group="",
        version="v1",
        plural="serviceaccounts",
        propagation=None,
        why="a test's",
    )
    monkeypatch.setattr(swept, "SWEPT_KINDS", (*SWEPT_KINDS, accounts))
    emu.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("sa-a", "a")})
    removed, errors = sweep(client(emu), NS, "run=a")
    assert errors == [] and removed["serviceaccounts"] == ["sa-a"]
    assert swept.kinds_text() == "JobSets, Jobs, Secrets and ServiceAccounts"
    assert names(emu, "serviceaccounts") == []


def test_a_kind_the_cluster_does_not_serve_is_none(emu, monkeypatch):
    """No JobSet CRD installed: the API server answers 404 on the list; there is none of it,
    and the other kinds are swept."""
    unserved = replace(SWEPT_KINDS[0], group="example.com", plural="widgets")
    monkeypatch.setattr(swept, "SWEPT_KINDS", (unserved, *SWEPT_KINDS[1:]))
    run_objects(emu, "a")
    removed, errors = sweep(client(emu), NS, "run=a")
    assert errors == []
    assert removed == {"widgets": [], "jobs": ["train-a"], "secrets": ["token-a"]}
