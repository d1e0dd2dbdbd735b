"""tpu_rl.preflight.cluster: the existing cluster read where it is."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from google.api_core.exceptions import NotFound

from tpu_rl.preflight import cluster
from tpu_rl.settings.run_settings import load_settings


def test_a_zonal_existing_cluster_is_found(tutorial_conf, monkeypatch):
    """clusters.get of projects/*/locations/<zone>/clusters/*: a zonal cluster is not under
    the region."""
    s = load_settings({**tutorial_conf, "cluster_mode": "existing"})
    found = SimpleNamespace(name=s.cluster_name, location=s.zone)
    monkeypatch.setattr(
        "airflow.providers.google.cloud.hooks.kubernetes_engine.GKEHook.__init__",
        lambda self, gcp_conn_id, location: setattr(self, "_where", location),
    )

    def get_cluster(self: Any, name: str, project_id: str) -> Any:
        if self._where != s.zone:
            raise NotFound(f"projects/{project_id}/locations/{self._where}/clusters/{name}")
        return found

    monkeypatch.setattr(
        "airflow.providers.google.cloud.hooks.kubernetes_engine.GKEHook.get_cluster", get_cluster
    )
    assert cluster.read_cluster(s, "gcp") is found
    found.autopilot = SimpleNamespace(enabled=False)
    zonal = cluster.check_standard(s, found)
    assert not zonal.passed and f"is a zonal cluster (in {s.zone})" in zonal.evidence


def pool(name: str, machine: str, topology: str, *taints: tuple[str, str]) -> SimpleNamespace:
    config = SimpleNamespace(
        machine_type=machine,
        service_account=f"{name}@p.iam.gserviceaccount.com",
        taints=[
            SimpleNamespace(key=k, value="x", effect=SimpleNamespace(name=e)) for k, e in taints
        ],
    )
    return SimpleNamespace(
        name=name, config=config, placement_policy=SimpleNamespace(tpu_topology=topology)
    )


def test_the_slice_pools_and_cpu_np_pass_when_the_pods_tolerate_their_taints(tutorial_conf):
    s = load_settings({**tutorial_conf, "cluster_mode": "existing"})
    tpu = pool("tpu-np", s.compute_type, s.topology, ("google.com/tpu", "NO_SCHEDULE"))
    found = SimpleNamespace(node_pools=[tpu, pool("cpu-np", "n2-standard-32", "")])
    result = cluster.check_pools(s, found)
    assert result.passed, result.line()
    assert cluster.pool_accounts(s, found) == {
        "tpu-np": "tpu-np@p.iam.gserviceaccount.com",
        "cpu-np": "cpu-np@p.iam.gserviceaccount.com",
    }


def test_missing_pools_and_blocking_taints_are_each_named(tutorial_conf):
    s = load_settings({**tutorial_conf, "cluster_mode": "existing"})
    blocking, preferred = ("team", "NO_EXECUTE"), ("x", "PREFER_NO_SCHEDULE")
    tainted = pool("tpu-np", s.compute_type, s.topology, blocking, preferred)
    result = cluster.check_pools(s, SimpleNamespace(node_pools=[tainted]))
    assert not result.passed
    assert result.evidence == (
        "no `cpu-np` pool for the Pathways head and the client; "
        "tpu-np has taints the run's pods do not tolerate: team=x:NO_EXECUTE"
    )
    other = pool("other", s.compute_type, "2x2")
    missing = cluster.check_pools(s, SimpleNamespace(node_pools=[other]))
    assert missing.evidence.startswith(
        f"0 node pool(s) of {s.compute_type} {s.topology}, the run needs 1"
    )


def test_a_missing_or_autopilot_cluster_is_not_standard(tutorial_conf):
    s = load_settings({**tutorial_conf, "cluster_mode": "existing"})
    assert "no GKE cluster" in cluster.check_standard(s, None).evidence
    autopilot = SimpleNamespace(autopilot=SimpleNamespace(enabled=True))
    assert cluster.check_standard(s, autopilot).evidence.endswith("is a GKE Autopilot cluster")
    regional = SimpleNamespace(
        autopilot=SimpleNamespace(enabled=False),
        location=s.region,
        status=SimpleNamespace(name="RUNNING"),
    )
    assert cluster.check_standard(s, regional).passed
