"""What every trigger of the package carries to reach the cluster (tpu_rl.kube.gke_trigger)."""

from __future__ import annotations

from types import SimpleNamespace

from tpu_rl.kube import gke_trigger
from tpu_rl.kube.gke_trigger import CONNECTION_KEYS, GkeTrigger, connection_of

OPERATOR = SimpleNamespace(
    cluster_info=("https://10.0.0.1", "Q0E="),
    gcp_conn_id="gcp",
    impersonation_chain=["sa@p.iam.gserviceaccount.com"],
    use_dns_endpoint=True,
)


def test_an_operators_cluster_and_credentials_are_the_triggers_connection():
    assert connection_of(OPERATOR) == {
        "cluster_url": "https://10.0.0.1",
        "ssl_ca_cert": "Q0E=",
        "gcp_conn_id": "gcp",
        "impersonation_chain": ["sa@p.iam.gserviceaccount.com"],
        "use_dns_endpoint": True,
    }
    assert set(connection_of(OPERATOR)) == set(CONNECTION_KEYS)


class Probe(GkeTrigger):
    """A GkeTrigger of its kwargs."""

    def __init__(self, **kwargs) -> None:
        super().__init__()
        self.kwargs = kwargs

    async def run(self):  # pragma: no cover - never run
        yield None


def test_a_trigger_serializes_as_its_classpath_and_a_copy_of_its_kwargs():
    trigger = Probe(**connection_of(OPERATOR), namespace="ns")
    path, kwargs = trigger.serialize()
    assert path == f"{__name__}.Probe"
    assert kwargs == trigger.kwargs and kwargs is not trigger.kwargs


def test_the_hook_reaches_the_triggers_cluster_with_its_credentials(monkeypatch):
    monkeypatch.setattr(gke_trigger, "GKEKubernetesAsyncHook", lambda **kwargs: kwargs)
    trigger = Probe(**connection_of(OPERATOR), namespace="ns")
    assert trigger.hook == connection_of(OPERATOR)  # the namespace is no hook's
    assert trigger.hook is trigger.hook  # made once
