"""The stricter sandbox: cluster model, scheduler, Kueue, identity and Kubernetes deletion/watch."""

from __future__ import annotations

import time

import pytest
from google.api_core import exceptions

from sandbox.cloud import GcsEmulator
from sandbox.cluster_model import GSA_ANNOTATION, ClusterModel
from sandbox.controller import Controller, Scenario
from sandbox.kube_emulator import running_emulator
from sandbox.kube_state import ApiError, ClusterState
from sandbox.kueue import QUEUE_LABEL, Kueue
from sandbox.pod_scripts import PodInfo, PodScript, exit, log
from sandbox.pod_storage import PodStorage
from sandbox.scheduler import Scheduler

VARS = {
    "project_id": "proj",
    "deployment_name": "gemma4-rl",
    "zone": "us-east5-b",
    "region": "us-east5",
    "num_slices": 1,
    "tpu_topology": "4x8",
}
CPU_POOL = {"cloud.google.com/gke-nodepool": "cpu-np"}
TPU_SELECTOR = {
    "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
    "cloud.google.com/gke-tpu-topology": "4x8",
}
TPU_TOLERATION = {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}


def cluster() -> ClusterState:
    state = ClusterState()
    ClusterModel.described(VARS).provision(state)
    return state


def pod(name: str, spec: dict, ns: str = "default") -> dict:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def container(cpu: str = "1", memory: str = "1Gi", tpu: int = 0, ports=()) -> dict:
    limits = {"cpu": cpu, "memory": memory, **({"google.com/tpu": str(tpu)} if tpu else {})}
    return {
        "name": "c",
        "image": "i",
        "resources": {"limits": limits},
        "ports": [{"containerPort": p} for p in ports],
    }


def events_for(state: ClusterState, name: str, reason: str | None = None) -> list[dict]:
    found = state.list("events", field_selector=f"involvedObject.name={name}")
    return [e for e in found if reason in (None, e["reason"])]


def test_tutorial_cluster_has_its_pools_labels_taints_and_allocatable():
    state = cluster()
    nodes = state.list("nodes")
    pools = [n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] for n in nodes]
    assert (pools.count("system"), pools.count("cpu-np"), pools.count("gke-tpu-v6e-pool")) == (
        2,
        2,
        8,
    )
    tpu = next(n for n in nodes if "gke-tpu-v6e-pool" in n["metadata"]["name"])
    assert tpu["status"]["allocatable"]["google.com/tpu"] == "4"
    assert tpu["metadata"]["labels"]["cloud.google.com/gke-tpu-topology"] == "4x8"
    assert tpu["spec"]["taints"] == [
        {"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}
    ]
    queue = state.get("clusterqueues", "", "cluster-queue")
    assert queue["spec"]["resourceGroups"][0]["coveredResources"] == ["google.com/tpu"]
    quota = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    assert quota == 32  # 1 slice x 8 hosts x 4 chips


def test_scheduler_binds_what_fits_and_explains_what_does_not():
    state = cluster()
    state.create(pod("fits", {"nodeSelector": CPU_POOL, "containers": [container("8", "32Gi")]}))
    state.create(pod("tpu", {"nodeSelector": TPU_SELECTOR, "containers": [container(tpu=4)]}))
    state.create(
        pod(
            "nowhere",
            {"nodeSelector": {"cloud.google.com/gke-nodepool": "gpu"}, "containers": [container()]},
        )
    )
    Scheduler(state).schedule()
    assert state.get("pods", "default", "fits")["spec"]["nodeName"].startswith(
        "gke-gemma4-rl-cpu-np"
    )
    assert "nodeName" not in state.get("pods", "default", "tpu")["spec"]
    [tpu_event] = events_for(state, "tpu", "FailedScheduling")
    assert tpu_event["reason"] == "FailedScheduling" and tpu_event["type"] == "Warning"
    assert tpu_event["message"] == (
        "0/12 nodes are available: 4 node(s) didn't match Pod's node affinity/selector, "
        "8 node(s) had untolerated taint {google.com/tpu: present}. preemption: 0/12 nodes are "
        "available: 12 Preemption is not helpful for scheduling."
    )
    [nowhere] = events_for(state, "nowhere", "FailedScheduling")
    [autoscaler] = events_for(state, "nowhere", "NotTriggerScaleUp")
    assert autoscaler["message"] == (
        "pod didn't trigger scale-up: 1 node(s) had untolerated taint {google.com/tpu: present}, "
        "2 node(s) didn't match Pod's node affinity/selector"
    )
    assert nowhere["message"].startswith(
        "0/12 nodes are available: 4 node(s) didn't match Pod's node affinity/selector, 8 node(s) "
        "had untolerated taint"
    )
    condition = state.get("pods", "default", "nowhere")["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )


def test_scheduler_counts_resources_and_host_ports_and_scales_cpu_pool_up():
    state = cluster()
    spec = {"nodeSelector": TPU_SELECTOR, "tolerations": [TPU_TOLERATION], "hostNetwork": True}
    for i in range(9):
        state.create(pod(f"w{i}", {**spec, "containers": [container(tpu=4, ports=[8471])]}))
    Scheduler(state).schedule()
    bound = [p for p in state.list("pods") if p["spec"].get("nodeName")]
    assert len(bound) == 8 and len({p["spec"]["nodeName"] for p in bound}) == 8
    [event] = events_for(state, "w8", "FailedScheduling")
    assert "8 node(s) didn't have free ports for the requested pod ports" in event["message"]
    big = {"nodeSelector": CPU_POOL, "containers": [container("60", "200Gi")]}
    for i in range(3):
        state.create(pod(f"head{i}", big))
    scheduler = Scheduler(state)
    for _ in range(3):
        scheduler.schedule()
    assert len([n for n in state.list("nodes") if "cpu-np" in n["metadata"]["name"]]) == 3
    assert all(state.get("pods", "default", f"head{i}")["spec"].get("nodeName") for i in range(3))
    assert any(e["reason"] == "TriggeredScaleUp" for e in events_for(state, "head2"))


def queued_jobset(name: str, head_limits: dict) -> dict:
    head = {"name": "c", "image": "i", "resources": {"limits": head_limits}}
    worker = container(tpu=4)
    worker["resources"] = {"limits": {"google.com/tpu": "4"}}

    def rjob(rj: str, replicas: int, parallelism: int, c: dict) -> dict:
        return {
            "name": rj,
            "replicas": replicas,
            "template": {
                "spec": {
                    "parallelism": parallelism,
                    "completions": parallelism,
                    "template": {"spec": {"containers": [c]}},
                }
            },
        }

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: "user-queue"}},
        "spec": {
            "replicatedJobs": [rjob("pathways-head", 1, 1, head), rjob("worker", 1, 8, worker)]
        },
    }


def workload_of(state: ClusterState, owner: dict) -> dict:
    [workload] = state.list(
        "workloads", label_selector=f"kueue.x-k8s.io/job-uid={owner['metadata']['uid']}"
    )
    return workload


def test_kueue_keeps_a_jobset_asking_for_uncovered_cpu_inadmissible():
    state = cluster()
    jobset = state.create(queued_jobset("backend", {"cpu": "24", "memory": "132Gi"}))
    assert jobset["spec"]["suspend"] is True  # Kueue's webhook
    Kueue(state).reconcile()
    workload = workload_of(state, jobset)
    assert workload["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert [ps["name"] for ps in workload["spec"]["podSets"]] == ["pathways-head", "worker"]
    [condition] = workload["status"]["conditions"]
    assert {k: condition[k] for k in ("type", "status", "reason", "message")} == {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
        "message": "couldn't assign flavors to pod set pathways-head: resource cpu unavailable "
        "in ClusterQueue",
    }
    assert state.get("jobsets", "default", "backend")["spec"]["suspend"] is True
    assert [e["reason"] for e in events_for(state, workload["metadata"]["name"])] == ["Pending"]


def test_kueue_admits_what_its_queue_covers_and_holds_quota():
    state = cluster()
    queue = state.get("clusterqueues", "", "cluster-queue")
    queue["spec"]["resourceGroups"].append(
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": "cpu-flavor",
                    "resources": [
                        {"name": "cpu", "nominalQuota": 500},
                        {"name": "memory", "nominalQuota": "2000Gi"},
                    ],
                }
            ],
        }
    )
    state.replace("clusterqueues", "", "cluster-queue", queue)
    state.create(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "cpu-flavor"},
            "spec": {},
        }
    )
    first = state.create(queued_jobset("first", {"cpu": "24", "memory": "132Gi"}))
    second = state.create(queued_jobset("second", {"cpu": "24", "memory": "132Gi"}))
    Kueue(state).reconcile()
    admitted = workload_of(state, first)
    assert {c["type"]: c["status"] for c in admitted["status"]["conditions"]} == {
        "QuotaReserved": "True",
        "Admitted": "True",
    }
    started = state.get("jobsets", "default", "first")
    assert started["spec"]["suspend"] is False
    worker_spec = started["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert worker_spec["nodeSelector"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice"}
    waiting = workload_of(state, second)["status"]["conditions"][0]
    assert waiting["message"] == (
        "couldn't assign flavors to pod set worker: insufficient unused quota for google.com/tpu "
        "in flavor tpuv6e-flavor, 32 more needed"
    )
    state.delete("jobsets", "default", "first")  # its Workload goes with it: quota freed
    Kueue(state).reconcile()
    assert state.get("jobsets", "default", "second")["spec"]["suspend"] is False


def test_a_foreground_deleted_owner_gets_no_new_workload_and_goes():
    """Kueue makes no Workload for a JobSet being deleted: one made after the cascade removed
    the first would hold the owner's foreground deletion (and quota) for ever."""
    state = cluster()
    jobset = state.create(queued_jobset("backend", {"google.com/tpu": "4"}))
    Kueue(state).reconcile()
    assert workload_of(state, jobset) is not None
    node = state.list("nodes")[0]["metadata"]["name"]  # bound: Terminating until its kubelet
    state.create(pod("backend-head", {"containers": [container()], "nodeName": node}))
    head = state.get("pods", "default", "backend-head")
    head["metadata"]["ownerReferences"] = [
        {"kind": "JobSet", "name": "backend", "uid": jobset["metadata"]["uid"]}
    ]
    state.replace("pods", "default", "backend-head", head)
    state.delete("jobsets", "default", "backend", propagation_policy="Foreground")
    assert state.get("jobsets", "default", "backend")["metadata"]["deletionTimestamp"]
    Kueue(state).reconcile()  # the cascade took the Workload; the owner still terminates
    assert state.list("workloads") == []
    state.delete("pods", "default", "backend-head", grace_period_seconds=0)
    assert state.get("jobsets", "default", "backend") is None


def test_missing_local_queue_is_reported():
    state = cluster()
    body = queued_jobset("backend", {"google.com/tpu": "4"})
    body["metadata"]["labels"][QUEUE_LABEL] = "no-such-queue"
    jobset = state.create(body)
    Kueue(state).reconcile()
    condition = workload_of(state, jobset)["status"]["conditions"][0]
    assert (condition["reason"], condition["message"]) == (
        "Inadmissible",
        "LocalQueue no-such-queue doesn't exist",
    )


def test_pod_identity_follows_host_network_and_bound_service_accounts():
    state = cluster()
    model = state.cluster
    state.create(
        pod("host", {"hostNetwork": True, "nodeSelector": CPU_POOL, "containers": [container()]})
    )
    state.create(
        pod(
            "bound", {"serviceAccountName": "workload-identity-k8s-sa", "containers": [container()]}
        )
    )
    state.create(pod("plain", {"containers": [container()]}))
    Scheduler(state).schedule()
    assert model.principal_of(state, "default", "host") == "gke-wl-sa@proj.iam.gserviceaccount.com"
    assert model.principal_of(state, "default", "bound") == "gke-wl-sa@proj.iam.gserviceaccount.com"
    plain = model.principal_of(state, "default", "plain")
    assert plain.endswith("proj.svc.id.goog/subject/ns/default/sa/default")
    assert model.roles_of(plain) == set()
    assert "storage.admin" in model.roles_of("gke-np-sa@proj.iam.gserviceaccount.com")
    sa = state.get("serviceaccounts", "default", "workload-identity-k8s-sa")
    assert sa["metadata"]["annotations"][GSA_ANNOTATION] == "gke-wl-sa@proj.iam.gserviceaccount.com"
    with pytest.raises(ApiError) as refused:
        state.create(pod("ghost", {"serviceAccountName": "ghost", "containers": [container()]}))
    assert refused.value.code == 403 and 'serviceaccount "ghost" not found' in refused.value.message


def test_gcs_refuses_a_pod_without_storage_identity_and_bad_bucket_classes():
    gcs = GcsEmulator()
    try:
        with running_emulator() as emu:
            ClusterModel.described(VARS).provision(emu)
            gcs.gate.roles_of = emu.cluster.roles_of
            gcs.write("gs://b/ckpt/_METADATA")
            emu.create(pod("client", {"containers": [container()]}))
            info = PodInfo("default", "client", "j", None, 0, {})
            storage = PodStorage(emu, gcs, "/deps/src/maxtext/trainers/post_train/rl/train_rl.py")
            with pytest.raises(Exception) as ended:
                storage.read(info, "gs://b/ckpt/_METADATA")
            text = ended.value.output
            assert text.splitlines()[-1].startswith(
                "google.api_core.exceptions.Forbidden: 403 GET "
            )
            assert "does not have storage.objects.get access" in text
            emu.create(
                pod(
                    "host",
                    {
                        "hostNetwork": True,
                        "nodeSelector": TPU_SELECTOR,
                        "tolerations": [TPU_TOLERATION],
                        "containers": [container(tpu=4)],
                    },
                )
            )
            Scheduler(emu).schedule()
            storage.write(PodInfo("default", "host", "j", 0, 0, {}), "gs://b/out/x", b"1")
        client = gcs.client()
        with pytest.raises(exceptions.BadRequest) as bad:
            bucket = client.bucket("regional-multi")
            bucket.storage_class = "MULTI_REGIONAL"
            client.create_bucket(bucket, location="us-east5")
        assert "combination of locationConstraint and storageClass" in str(bad.value)
        bucket = client.bucket("regional-standard")
        bucket.storage_class = "STANDARD"
        client.create_bucket(bucket, location="us-east5")
        meta = gcs.bucket_metadata("regional-standard")
        assert (meta["location"], meta["storageClass"]) == ("US-EAST5", "STANDARD")
    finally:
        gcs.stop()


def test_foreground_delete_waits_for_terminating_pods():
    with running_emulator() as emu:
        ClusterModel.described(VARS).provision(emu)
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "nodeSelector": CPU_POOL,
                        "containers": [container()],
                    }
                }
            },
        }
        scenario = Scenario(pending_s=0, terminate_s=400).on("j", _forever())
        with Controller(emu, scenario, time_scale=0.001):
            emu.create(job)
            _until(lambda: emu.list("pods") and emu.list("pods")[0]["status"]["phase"] == "Running")
            emu.delete("jobs", "default", "j", propagation_policy="Foreground")
            terminating = emu.get("jobs", "default", "j")
            assert terminating["metadata"]["finalizers"] == ["foregroundDeletion"]
            assert terminating["metadata"]["deletionTimestamp"]
            [p] = emu.list("pods")
            assert (
                p["metadata"]["deletionTimestamp"]
                and p["metadata"]["deletionGracePeriodSeconds"] == 30
            )
            _until(lambda: emu.get("jobs", "default", "j") is None)
            assert emu.list("pods") == []


def _forever() -> PodScript:
    from sandbox.pod_scripts import run_forever

    return PodScript([log("up\n"), run_forever()])


def _until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_watch_from_a_resource_version_older_than_the_history_answers_410():
    import json
    import ssl
    import urllib.request

    with running_emulator() as emu:
        emu.history_limit = 5
        first = emu.create({"kind": "Secret", "metadata": {"name": "s0"}})
        for i in range(1, 10):
            emu.create({"kind": "Secret", "metadata": {"name": f"s{i}"}})
        context = ssl.create_default_context(cafile=emu.ca_file)
        url = (
            f"{emu.url}/api/v1/namespaces/default/secrets?watch=true&timeoutSeconds=2"
            f"&resourceVersion={first['metadata']['resourceVersion']}"
        )
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {emu.token}"})
        with urllib.request.urlopen(request, context=context) as response:
            events = [json.loads(line) for line in response.read().splitlines()]
        assert [e["type"] for e in events] == ["ERROR"]
        status = events[0]["object"]
        assert (status["code"], status["reason"]) == (410, "Expired")
        assert status["message"].startswith("too old resource version: ")


def test_no_op_update_keeps_the_resource_version():
    state = ClusterState()
    secret = state.create({"kind": "Secret", "metadata": {"name": "s"}})
    again = state.patch("secrets", "default", "s", {"metadata": {"labels": None}})
    assert again["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"]


def test_failed_conversion_like_pod_is_reported_by_exit(tmp_path):
    """A ContainerExit from a call step prints its output and ends the container."""
    from sandbox.pod_scripts import ContainerExit, call

    def refuse(_info: PodInfo) -> None:
        raise ContainerExit(3, "Forbidden\n")

    with running_emulator() as emu:
        scenario = Scenario(pending_s=0).on("j", PodScript([log("start\n"), call(refuse), exit(0)]))
        with Controller(emu, scenario, time_scale=0.001):
            emu.create(
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {"name": "j"},
                    "spec": {
                        "backoffLimit": 0,
                        "template": {
                            "spec": {"restartPolicy": "Never", "containers": [container()]}
                        },
                    },
                }
            )
            _until(
                lambda: any(
                    c["type"] == "Failed"
                    for c in (emu.get("jobs", "default", "j").get("status") or {}).get(
                        "conditions", []
                    )
                )
            )
            [p] = emu.list("pods")
            _, log_ = emu.read_log("default", p["metadata"]["name"], None)
            assert log_.render(log_.select(None, None), False) == b"start\nForbidden\n"
            assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def test_a_cluster_made_after_another_on_the_emulator_has_its_own_kueue_quota():
    """One emulator serves every cluster the process harness makes in turn: a one-slice cluster
    destroyed, then a two-slice one (the two-deployment scenario's, after the approval
    scenario's): the earlier cluster's ClusterQueue (one slice) goes with it, or the second of
    two one-slice JobSets would never be admitted on the two-slice cluster."""
    state = ClusterState()
    earlier = ClusterModel.described({**VARS, "kueue": "pathways"})
    earlier.provision(state)
    earlier.running = False  # destroyed (GkeControlPlane.sync): the next deploy provisions anew
    ClusterModel.described({**VARS, "kueue": "pathways", "num_slices": 2}).provision(state)
    first = state.create(queued_jobset("first", {"cpu": "24", "memory": "132Gi"}))
    second = state.create(queued_jobset("second", {"cpu": "24", "memory": "132Gi"}))
    Kueue(state).reconcile()
    for jobset in (first, second):
        conditions = workload_of(state, jobset)["status"]["conditions"]
        assert {c["type"]: c["status"] for c in conditions}["Admitted"] == "True", conditions
    assert len(state.admission_hooks) == 2  # the new cluster's ServiceAccount check and Kueue's
