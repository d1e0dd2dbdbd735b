"""Rendered Kubernetes objects: valid against the cluster's schemas, faithful to the tutorial."""

from __future__ import annotations

import base64
import json
import re

import pytest

from tests.schemas import validate_manifest
from tpu_rl.backend import jobset as pw
from tpu_rl.jobs import manifests as m
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import load_settings

RUN_ID = "manual__2026-11-29T10:00:00+00:00"


@pytest.fixture
def layout(tutorial_conf) -> RunLayout:
    return RunLayout(load_settings(tutorial_conf), RUN_ID, "test-deployment")


def all_objects(layout: RunLayout) -> list[dict]:
    return [
        m.token_secret(layout),
        m.conversion_job(layout),
        pw.backend_jobset(layout),
        m.train_job(layout),
        m.export_job(layout, 50),
    ]


def containers(obj: dict) -> list[dict]:
    if obj["kind"] == "Job":
        return obj["spec"]["template"]["spec"]["containers"]
    if obj["kind"] == "JobSet":
        return [
            c
            for rj in obj["spec"]["replicatedJobs"]
            for c in rj["template"]["spec"]["template"]["spec"]["containers"]
        ]
    return []


@pytest.mark.parametrize(
    ("tpu_type", "topology"),
    [("v6e-16", "4x4"), ("v6e-32", "4x8"), ("v6e-64", "8x8"), ("v6e-256", "16x16")],
)
def test_every_object_validates_for_any_v6e_topology(tutorial_conf, tpu_type, topology):
    conf = {**tutorial_conf, "tpu_type": tpu_type, "topology": topology}
    for obj in all_objects(RunLayout(load_settings(conf), RUN_ID, "test-deployment")):
        validate_manifest(obj)


def test_a_wrong_field_fails_validation(layout):
    """The validators are strict: they catch what the cluster's API server would reject."""
    job = m.train_job(layout)
    job["spec"]["template"]["spec"]["containers"][0]["enviroment"] = []
    with pytest.raises(Exception, match="enviroment"):
        validate_manifest(job)
    jobset = pw.backend_jobset(layout)
    jobset["spec"]["replicatedJobs"][0]["replica"] = 1
    with pytest.raises(Exception, match="replica"):
        validate_manifest(jobset)


@pytest.mark.parametrize(
    ("topology", "tpu_type", "hosts"),
    [("4x4", "v6e-16", 4), ("4x8", "v6e-32", 8), ("8x8", "v6e-64", 16)],
)
def test_tpu_workers_cover_every_host_of_the_slice(tutorial_conf, topology, tpu_type, hosts):
    layout = RunLayout(
        load_settings({**tutorial_conf, "topology": topology, "tpu_type": tpu_type}),
        RUN_ID,
        "test-deployment",
    )
    worker = pw.backend_jobset(layout)["spec"]["replicatedJobs"][1]
    assert worker["name"] == "worker" and worker["replicas"] == 1
    spec = worker["template"]["spec"]
    assert spec["parallelism"] == spec["completions"] == hosts and spec["backoffLimit"] == hosts * 4
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": topology,
    }
    assert pod["containers"][0]["resources"]["limits"]["google.com/tpu"] == "4"
    assert pod["hostNetwork"] and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["restartPolicy"] == "OnFailure"
    rm = pw.backend_jobset(layout)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"
    ]["containers"][1]
    assert f"--instance_type=tpuv6e:{topology}" in rm["args"]
    conversion = m.conversion_job(layout)["spec"]
    assert conversion["parallelism"] == conversion["completions"] == hosts


def test_every_container_defines_the_variables_its_args_expand(layout):
    for obj in all_objects(layout):
        for c in containers(obj):
            defined = {e["name"] for e in c.get("env", [])}
            used = set(
                re.findall(r"\$\((\w+)\)", " ".join(c.get("args", []) + c.get("command", [])))
            )
            assert used <= defined, (obj["kind"], c["name"], used - defined)


def test_every_pathways_container_gets_the_tutorials_environment(layout):
    for c in containers(pw.backend_jobset(layout)) + containers(m.train_job(layout)):
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["GRPC_DNS_RESOLVER"] == "native"
        assert env["FLAGS_pathways_enforce_subset_devices_form_subslice"] == "false"
        assert env["GRPC_KEEPALIVE_TIME_MS"] == "60000"


def test_training_client_connects_to_the_backend(layout):
    c = containers(m.train_job(layout))[0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["JAX_PLATFORMS"] == "proxy,cpu"
    assert env["ENABLE_PATHWAYS_PERSISTENCE"] == "1"
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert (
        env["JAX_BACKEND_TARGET"]
        == f"grpc://{layout.backend_jobset}-pathways-head-0-0.{layout.backend_jobset}:29000"
    )


def test_optimizer_patch_only_with_adafactor(tutorial_conf):
    ada = m.train_script(RunLayout(load_settings(tutorial_conf), RUN_ID, "test-deployment"))
    assert "optax.adafactor(learning_rate=learning_rate)" in ada and ada.index(
        "python3 -c"
    ) < ada.index("train_rl")
    adamw = m.train_script(
        RunLayout(load_settings({**tutorial_conf, "optimizer": "adamw"}), RUN_ID, "test-deployment")
    )
    assert "optax" not in adamw


def test_optimizer_patch_fails_loudly_when_maxtext_changed(tmp_path):
    """The tutorial's sed-like patch silently does nothing when the pattern moves; ours stops."""
    target = tmp_path / "utils_rl.py"
    code = m.OPTIMIZER_PATCH.replace(
        "/deps/src/maxtext/trainers/post_train/rl/utils_rl.py", str(target)
    )
    target.write_text("opt = optax.adamw(learning_rate=learning_rate, b1=0.9)\n")
    exec(code, {})
    assert target.read_text() == "opt = optax.adafactor(learning_rate=learning_rate)\n"
    with pytest.raises(AssertionError, match="not found"):
        exec(code, {})


def test_two_runs_never_share_names_or_outputs(tutorial_conf):
    settings = load_settings(tutorial_conf)
    a, b = (
        RunLayout(settings, RUN_ID, "test-deployment"),
        RunLayout(settings, "scheduled__2026-11-30T00:00:00+00:00", "test-deployment"),
    )
    names_a = {o["metadata"]["name"] for o in all_objects(a)}
    names_b = {o["metadata"]["name"] for o in all_objects(b)}
    assert len(names_a) == 5 and not names_a & names_b
    assert a.checkpoints_dir != b.checkpoints_dir and a.export_dir != b.export_dir
    assert a.maxtext_items == b.maxtext_items  # the converted base model is shared on purpose


def test_names_fit_kubernetes_limits(layout):
    for obj in all_objects(layout):
        name = obj["metadata"]["name"]
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 52, name
    # JobSet pod hostnames: <jobset>-<replicatedJob>-<jobIndex>-<podIndex> must stay a DNS label
    assert len(f"{layout.backend_jobset}-pathways-head-0-0") <= 63
    assert len(f"{layout.backend_jobset}-worker-0-{layout.hosts - 1}") <= 63


def test_token_appears_in_no_manifest_and_only_base64_in_the_secret(layout):
    token = "hf_" + "s3cr3t" * 6
    rendered = json.dumps(all_objects(layout))
    assert token not in rendered
    secret = m.token_secret(layout, token)
    assert base64.b64decode(secret["data"]["token"]).decode() == token
    for obj in all_objects(layout):
        for c in containers(obj):
            if c["name"] == m.CONTAINER:
                ref = next(e for e in c["env"] if e["name"] == "HF_TOKEN")
                assert ref["valueFrom"]["secretKeyRef"] == {
                    "name": layout.token_secret,
                    "key": "token",
                }
                assert 'hf_access_token="${HF_TOKEN}"' in c["command"][2]


def test_every_object_carries_the_run_labels(layout):
    for obj in all_objects(layout):
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "tpu-rl-airflow"
        assert obj["metadata"]["labels"]["tpu-rl.dev/run"] == layout.slug
        assert obj["metadata"]["annotations"]["tpu-rl.dev/run-id"] == RUN_ID


def test_jobs_stop_themselves_at_their_timeout(layout):
    """A TPU Job's deadline counts from its admission, pods pending for capacity included: it
    covers the capacity wait and then the step's limit."""
    s = layout.settings
    wait = s.pending_timeout_minutes
    assert (
        m.conversion_job(layout)["spec"]["activeDeadlineSeconds"]
        == (wait + s.conversion_timeout_minutes) * 60
    )
    assert m.train_job(layout)["spec"]["activeDeadlineSeconds"] == s.training_timeout_minutes * 60
    assert (
        m.export_job(layout, 7)["spec"]["activeDeadlineSeconds"]
        == (wait + s.export_timeout_minutes) * 60
    )


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def test_pods_that_use_the_bucket_get_the_node_pools_identity_as_the_tutorials_head_pod(layout):
    """Host network: GKE's metadata server then answers with the node pool's service account
    (storage.admin); a pod on the pod network with the default KSA would have no identity."""
    for job in (m.conversion_job(layout), m.train_job(layout), m.export_job(layout, 50)):
        spec = pod_spec(job)
        assert spec["hostNetwork"] is True, job["metadata"]["name"]
        assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
        assert "serviceAccountName" not in spec
        # a host-network pod on cpu-np must not claim the Pathways head's host ports
        assert all("ports" not in c for c in spec["containers"])


def test_a_workload_identity_service_account_replaces_the_host_network(tutorial_conf):
    layout = RunLayout(
        load_settings({**tutorial_conf, "client_service_account": "workload-identity-k8s-sa"}),
        RUN_ID,
        "test-deployment",
    )
    for job in (m.conversion_job(layout), m.train_job(layout), m.export_job(layout, 50)):
        spec = pod_spec(job)
        assert spec["serviceAccountName"] == "workload-identity-k8s-sa"
        assert "hostNetwork" not in spec and "dnsPolicy" not in spec
        validate_manifest(job)
    # the Pathways backend keeps gcluster's host network
    backend = pw.backend_jobset(layout)
    for rj in backend["spec"]["replicatedJobs"]:
        assert rj["template"]["spec"]["template"]["spec"]["hostNetwork"] is True
