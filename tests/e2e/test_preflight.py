"""`make preflight` against the sandbox: with everything in order every check
passes, in both cluster modes, and no request that changes anything reaches any emulator; each
refusal a real project can give fails its one check, with the evidence and the fix; a failed
preflight stops the DAG's run before anything is spent.

One sandbox for the module (an existing cluster `gemma4-rl` beside the create-mode settings);
a scenario changes one fact (sandbox/project_facts.py, the cluster's objects, the
connections) and puts it back. Without preflight every scenario's problem (zone, reservation,
API, IAM, bucket, Kueue, image, licence) meets the run only once it has spent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from sandbox import cluster_faults as fault
from sandbox.harness import EXISTING_CLUSTER_VARS, SETTINGS, Sandbox
from sandbox.project_facts import ProjectFacts
from tools import preflight as preflight_tool
from tpu_rl.settings.fields import TUTORIAL_MODEL
from tpu_rl.settings.images import TUTORIAL_IMAGE

CLUSTER = SETTINGS["cluster_name"]
EXISTING = {**SETTINGS, "cluster_mode": "existing"}
READ_ONLY_POSTS = (":testIamPermissions", ":getIamPolicy")
CREATE_CHECKS = {
    "apis enabled",
    "caller permissions",
    "tpu in zone",
    "reservation",
    "bucket location",
    "bucket policy",
    "image pullable (cloud_image_name)",
    "image pullable (pathways_server_image)",
    "image pullable (pathways_proxy_server_image)",
    "hf token",
    f"hf model access ({TUTORIAL_MODEL})",
    "vertex registry",
}
EXISTING_CHECKS = CREATE_CHECKS | {
    "gke standard",
    "node pools",
    "node pool roles",
    "jobset installed",
    "kueue installed",
    "kueue queue covers the run",
    "priority class",
}


@pytest.fixture(scope="module")
def box(airflow_db: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    sandbox = Sandbox(tmp_path_factory.mktemp("preflight"))
    with sandbox.up(CLUSTER, existing_cluster_vars=EXISTING_CLUSTER_VARS) as up:
        yield up


@pytest.fixture
def facts(box: Sandbox) -> Iterator[ProjectFacts]:
    """The project as the scenario has it: fresh for each test."""
    fresh = ProjectFacts()
    fresh.account_roles = box.google.facts.account_roles
    box.google.facts = fresh
    yield fresh


Preflight = Callable[[dict[str, Any]], tuple[int, dict[str, str]]]


@pytest.fixture
def preflight(box: Sandbox, facts: ProjectFacts, tmp_path: Path, capsys: Any) -> Preflight:
    """Run `make preflight`'s tool on settings: (exit status, {check name: its line})."""

    def run(conf: dict[str, Any]) -> tuple[int, dict[str, str]]:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps(conf))
        status = preflight_tool.main([str(settings)])
        out = capsys.readouterr().out
        lines = [line for line in out.splitlines() if line.startswith(("PASS ", "FAIL "))]
        return status, {line[5:].split(": ", 1)[0]: line for line in lines}

    return run


def failures(lines: dict[str, str]) -> dict[str, str]:
    return {name: line for name, line in lines.items() if line.startswith("FAIL ")}


@pytest.mark.parametrize(
    ("conf", "checks"),
    [(SETTINGS, CREATE_CHECKS), (EXISTING, EXISTING_CHECKS)],
    ids=["create", "existing"],
)
def test_every_check_passes_and_nothing_is_changed(box, preflight, conf, checks, monkeypatch):
    """Every check applies and passes; every request to every emulator reads; Compute Engine
    and Resource Manager are read through their typed clients."""
    clients = typed_clients_of_requests(monkeypatch)
    google, kube, gcs = (
        len(box.google.requests),
        len(box.emu.requests),
        len(box.gcs.traffic.requests),
    )
    status, lines = preflight(conf)
    assert failures(lines) == {} and status == 0, lines
    assert set(lines) == checks
    sent = [(m, f"{h}{p}") for m, h, p in box.google.requests[google:]]
    sent += [(r.method, r.path) for r in box.emu.requests[kube:]]
    sent += [tuple(r.split(" ", 1)) for r in box.gcs.traffic.requests[gcs:]]
    assert sent, "preflight read nothing"
    changing = [
        (method, path)
        for method, path in sent
        if method not in ("GET", "HEAD")
        and not (method == "POST" and path.split("?")[0].endswith(READ_ONLY_POSTS))
    ]
    assert changing == []
    assert box.control_plane.deleted == []
    assert set(clients) >= {"compute.googleapis.com", "cloudresourcemanager.googleapis.com"}
    assert all(kind == "typed" for kind in clients.values()), clients


TYPED_HOSTS = ("compute.googleapis.com", "cloudresourcemanager.googleapis.com")


def typed_clients_of_requests(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """{host: "typed" or what else sent a request to Compute Engine or Resource Manager}: a
    typed client names its library in `x-goog-api-client` (google-api-core 2.44
    client_info.py line 106: `gapic/{gapic_version}`), a plain session sends none; an HTTP
    request at all is the REST transport's (gRPC would not reach the sandbox)."""
    import requests

    seen: dict[str, str] = {}
    send = requests.Session.request

    def recording(session: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        host = next((h for h in TYPED_HOSTS if f"/{h}/" in url), None)
        if host is not None:
            client = str((kwargs.get("headers") or {}).get("x-goog-api-client", ""))
            typed = "gapic/" in client
            if seen.get(host, "typed") == "typed":
                seen[host] = "typed" if typed else f"{method} {url} ({client or 'no client'})"
        return send(session, method, url, *args, **kwargs)

    monkeypatch.setattr(requests.Session, "request", recording)
    return seen


def existing_bucket(box: Sandbox, name: str, location: str, protected: bool) -> dict[str, Any]:
    """A bucket made before the run; `protected`: uniform access and public access prevention."""
    bucket = box.gcs.client().bucket(name)
    bucket.iam_configuration.uniform_bucket_level_access_enabled = protected
    bucket.iam_configuration.public_access_prevention = "enforced" if protected else "inherited"
    box.gcs.client().create_bucket(bucket, location=location)
    return {"gcs_bucket": name}


# (scenario, fact change returning conf overrides, the check that fails, words of its line)
CREATE_REFUSALS = [
    (
        "zone_without_v6e",
        lambda box, f: {"zone": "us-east5-c"},
        "tpu in zone",
        "fix: set zone to one of us-east5-a, us-east5-b",
    ),
    (
        "missing_reservation",
        lambda box, f: {"reservation": "no-such-reservation"},
        "reservation",
        "no reservation 'no-such-reservation' in us-east5-b",
    ),
    (
        "too_few_free_chips",
        lambda box, f: f.reservations[SETTINGS["reservation"]].update(inUseCount=4) or {},
        "reservation",
        "has 4 free of 8 ct6e-standard-4t VMs; the run needs 8",
    ),
    (
        "wrong_machine_type",
        lambda box, f: (
            f.reservations[SETTINGS["reservation"]].update(machineType="ct5lp-hightpu-4t") or {}
        ),
        "reservation",
        "reserves ct5lp-hightpu-4t, the run needs ct6e-standard-4t",
    ),
    (
        "api_disabled",
        lambda box, f: f.enabled_apis.discard("container.googleapis.com") or {},
        "apis enabled",
        "fix: gcloud services enable container.googleapis.com",
    ),
    (
        "missing_permission",
        lambda box, f: f.denied_permissions.add("iam.serviceAccounts.actAs") or {},
        "caller permissions",
        "lack iam.serviceAccounts.actAs",
    ),
    (
        "bucket_in_another_region",
        lambda box, f: existing_bucket(box, "tpu-rl-europe-bucket", "europe-west4", True),
        "bucket location",
        "is in europe-west4",
    ),
    (
        "image_not_pullable",
        lambda box, f: {"cloud_image_name": TUTORIAL_IMAGE.replace(":0.2.4", ":0.9.9")},
        "image pullable (cloud_image_name)",
        "no manifest",
    ),
    (
        "licence_not_accepted",
        lambda box, f: f.licences.clear() or {},
        f"hf model access ({TUTORIAL_MODEL})",
        "fix: accept the model's licence",
    ),
]


@pytest.mark.parametrize(
    ("change", "check", "words"),
    [pytest.param(c, k, w, id=name) for name, c, k, w in CREATE_REFUSALS],
)
def test_a_refusal_fails_its_check_with_the_fix(box, facts, preflight, change, check, words):
    overrides = change(box, facts)
    status, lines = preflight({**SETTINGS, **overrides})
    assert status == 1
    # a zone without v6e has no reservation either: that line says where it is
    also = {"reservation"} if "zone" in overrides else set()
    assert set(failures(lines)) == {check} | also, lines
    assert words in lines[check] and " -> fix: " in lines[check], lines[check]
    if also:
        assert "; it is in us-east5-b" in lines["reservation"], lines["reservation"]


def test_an_unprotected_bucket_passes_with_a_warning_as_a_run_uses_it(box, facts, preflight):
    """A run uses an existing bucket as it is, warning of what it lacks."""
    status, lines = preflight(
        {**SETTINGS, **existing_bucket(box, "tpu-rl-acl-bucket", SETTINGS["region"], False)}
    )
    assert status == 0, lines
    assert "warning: uniform bucket-level access is off" in lines["bucket policy"]
    assert (
        "gcloud storage buckets update gs://tpu-rl-acl-bucket --uniform-bucket-level-access"
        in (lines["bucket policy"])
    )


def test_an_invalid_hugging_face_token_fails_with_the_fix(box, preflight, monkeypatch):
    conn = json.dumps({"conn_type": "generic", "password": "hf_NotAValidToken0000000000000000"})
    monkeypatch.setenv("AIRFLOW_CONN_HUGGINGFACE_DEFAULT", conn)
    status, lines = preflight(SETTINGS)
    assert status == 1 and set(failures(lines)) == {"hf token"}, lines
    assert "refused the token (HTTP 401: Invalid credentials" in lines["hf token"]
    assert "fix: make a Read token at https://huggingface.co/settings/tokens" in lines["hf token"]


FAKE_TOKEN = "hf_SECRETtoken123"


def preflight_output(conf: dict[str, Any], tmp_path: Path, capsys: Any) -> tuple[int, str]:
    """`make preflight`'s exit status and everything it printed, stdout and stderr."""
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(conf))
    status = preflight_tool.main([str(settings)])
    out, err = capsys.readouterr()
    return status, out + err


def use_hf_password(monkeypatch: pytest.MonkeyPatch, password: str) -> None:
    conn = json.dumps({"conn_type": "generic", "password": password})
    monkeypatch.setenv("AIRFLOW_CONN_HUGGINGFACE_DEFAULT", conn)


def preflight_step(monkeypatch: pytest.MonkeyPatch, run_id: str) -> Any:
    """The DAG's preflight task of a run of SETTINGS, to execute."""
    from tpu_rl.layout import RunLayout
    from tpu_rl.operators.preflight import PreflightOperator
    from tpu_rl.settings.run_settings import load_settings

    step = PreflightOperator(task_id="preflight")
    layout = RunLayout(load_settings(SETTINGS), run_id, "dep")
    monkeypatch.setattr(step, "run_layout", lambda context: layout)
    return step


def test_a_token_ending_in_a_newline_never_shows_and_is_not_retried(
    box, facts, monkeypatch, tmp_path, capsys, caplog
):
    """The password of a secret written with `echo`. The newline is
    stripped (tpu_rl.deployment.token_of_password), so the Hub answers for the token itself:
    a refusal, which no retry clears; nothing prints the token (unstripped, requests would refuse
    the header with an error quoting the token, a transient error to retry)."""
    use_hf_password(monkeypatch, f"{FAKE_TOKEN}\n")
    status, output = preflight_output(SETTINGS, tmp_path, capsys)
    assert status == 1 and "FAIL hf token: huggingface.co refused the token (HTTP 401" in output
    assert "SECRET" not in output and "token123" not in output, output
    with pytest.raises(AirflowFailException) as failed:  # AirflowFailException: no retry
        preflight_step(monkeypatch, "manual__newline").execute({})
    logged = caplog.text + str(failed.value) + "".join(capsys.readouterr())
    assert "refused the token (HTTP 401" in str(failed.value)
    assert "SECRET" not in logged and "token123" not in logged, logged


def test_the_sandbox_token_with_a_trailing_crlf_is_used_without_it(box, preflight, monkeypatch):
    from sandbox.harness import HF_TOKEN

    use_hf_password(monkeypatch, f"{HF_TOKEN}\r\n")
    status, lines = preflight(SETTINGS)
    assert status == 0 and lines["hf token"].startswith("PASS hf token: valid"), lines


def test_a_token_with_a_line_break_inside_is_refused_before_any_request(
    box, monkeypatch, tmp_path, capsys
):
    use_hf_password(monkeypatch, "hf_SECRET\ntoken123")
    sent = len(box.google.requests)
    status, output = preflight_output(SETTINGS, tmp_path, capsys)
    assert status == 1
    whitespace = "its password holds whitespace"
    assert f"FAIL hf connection: connection 'huggingface_default': {whitespace}" in output
    assert "SECRET" not in output and "token123" not in output, output
    assert [r for r in box.google.requests[sent:] if r[1] == "huggingface.co"] == []
    with pytest.raises(AirflowFailException, match="holds whitespace") as failed:  # no retry
        preflight_step(monkeypatch, "manual__inside").execute({})
    assert "SECRET" not in str(failed.value)


EXISTING_REFUSALS = [
    ("autopilot_cluster", fault.autopilot, "gke standard", "is a GKE Autopilot cluster"),
    ("kueue_missing", fault.kueue_missing, "kueue installed", "kueue is not installed"),
    (
        "kueue_too_old",
        fault.kueue_at("v0.14.2"),
        "kueue installed",
        "kueue:v0.14.2; the run needs v0.15.0",
    ),
    (
        "queue_not_covering",
        fault.queue_covers_tpu_only,
        "kueue queue covers the run",
        "covers google.com/tpu, not cpu, memory",
    ),
]


@pytest.mark.parametrize(
    ("change", "check", "words"),
    [pytest.param(c, k, w, id=name) for name, c, k, w in EXISTING_REFUSALS],
)
def test_an_existing_cluster_refusal_fails_its_check(box, preflight, change, check, words):
    preflight(EXISTING)  # the cluster is provisioned in the emulator on its first read
    undo = change(box.emu)
    try:
        status, lines = preflight(EXISTING)
    finally:
        undo()
    assert status == 1 and set(failures(lines)) == {check}, lines
    assert words in lines[check] and " -> fix: " in lines[check], lines[check]


def test_past_a_cluster_that_is_not_standard_the_cluster_checks_say_why_they_did_not_run(
    box, tmp_path, capsys
):
    """Every check has its line: the ones needing the cluster are SKIPPED, naming the check
    that failed (none is left out)."""
    preflight_output(EXISTING, tmp_path, capsys)  # the cluster is provisioned on its first read
    undo = fault.autopilot(box.emu)
    try:
        status, output = preflight_output(EXISTING, tmp_path, capsys)
    finally:
        undo()
    assert status == 1 and "FAIL gke standard: " in output
    why = "needs an existing GKE Standard cluster (gke standard failed)"
    for check in ("node pools", "jobset installed", "priority class"):
        assert f"SKIPPED {check}: {why}" in output, output


def test_a_missing_priority_class_fails_with_the_fix(box, preflight, monkeypatch):
    monkeypatch.setenv("TPU_RL_PRIORITY_CLASS", "urgent")
    status, lines = preflight(EXISTING)
    assert status == 1 and set(failures(lines)) == {"priority class"}, lines
    assert "no PriorityClass 'urgent'" in lines["priority class"]
    assert "fix: kubectl create priorityclass urgent" in lines["priority class"]
    monkeypatch.setenv("TPU_RL_PRIORITY_CLASS", "high")  # one the blueprint makes
    assert preflight(EXISTING)[0] == 0


def test_a_failed_preflight_stops_the_run_before_anything_is_spent(box, facts, capfd):
    """The DAG's preflight task fails the run right after validate: no bucket, no cluster."""
    conf = {**SETTINGS, "zone": "us-east5-c", "gcs_bucket": "tpu-rl-never-made"}
    result = box.run(conf)
    log = capfd.readouterr()
    assert result.state == "failed"
    assert result.task_states["validate"] == "success"
    assert result.task_states["preflight"] == "failed"
    assert result.task_states["ensure_bucket"] == "upstream_failed"
    assert result.task_states["create_cluster"] == "upstream_failed"
    assert result.calls == [] and result.gcs.bucket_metadata("tpu-rl-never-made") is None
    assert "FAIL tpu in zone: ct6e-standard-4t is not offered in us-east5-c" in log.out + log.err


def test_the_report_ends_with_the_runs_cost_estimate(box, facts, tmp_path, capsys):
    """After the checks, make preflight says what the run will cost (tpu_rl.report.estimate)."""
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(SETTINGS))
    assert preflight_tool.main([str(settings)]) == 0
    out = capsys.readouterr().out
    assert (
        "reservation (chosen): 77.33 chip-hours = 19.33 host-hours (2.42 h billed), no spend of "
        "the run's own: the reservation's commitment" in out
    )
    assert out.index("PASS ") < out.index("chip-hours")


def _calendar(facts: ProjectFacts, start_h: float, **request: str) -> dict[str, Any]:
    """A calendar-mode future reservation `v6e-calendar` of the run's zone, from `start_h`
    hours from now for two days, with the request's fields."""
    from datetime import UTC, datetime, timedelta

    start = datetime.now(UTC) + timedelta(hours=start_h)
    facts.future_reservations["v6e-calendar"] = {
        "zone": SETTINGS["zone"],
        "startTime": start.isoformat().replace("+00:00", "Z"),
        "endTime": (start + timedelta(days=2)).isoformat().replace("+00:00", "Z"),
        **request,
    }
    return {"capacity": "calendar", "reservation": "v6e-calendar"}


@pytest.mark.parametrize("state", ["PENDING_APPROVAL", "DECLINED"])
def test_a_calendar_request_google_has_not_approved_fails(box, facts, preflight, state):
    """The request's procurementStatus is read."""
    status, lines = preflight({**SETTINGS, **_calendar(facts, 2, procurementStatus=state)})
    assert status == 1 and set(failures(lines)) == {"reservation"}, lines
    assert f"v6e-calendar is {state}" in lines["reservation"], lines["reservation"]


def test_a_calendar_prefix_names_the_reservation_compute_delivered(box, facts, preflight):
    """With `namePrefix` the pool consumes `<prefix>-date-####`, the
    reservation Compute Engine made at the start, not the future reservation's name."""
    conf = {**SETTINGS, **_calendar(facts, -1, namePrefix="v6e-cal")}
    status, lines = preflight(conf)
    assert status == 0, lines
    assert "the TPU pool consumes its reservation v6e-cal-" in lines["reservation"], lines


def test_a_flex_start_run_is_checked_against_preemptible_v6e_quota(box, facts, preflight):
    """Cloud Quotas' PREEMPTIBLE-TPU-V6E limit, below the slice's 32 chips, fails (regions.get
    lists no v6e metric: a check reading it would always pass)."""
    facts.quota_infos["PREEMPTIBLE-TPU-V6E-per-project-region"] = [
        ({}, 64),
        ({"region": SETTINGS["region"]}, 16),
    ]
    conf = {**SETTINGS, "capacity": "flex_start", "reservation": ""}
    status, lines = preflight(conf)
    assert status == 1 and set(failures(lines)) == {"tpu quota"}, lines
    assert "PREEMPTIBLE-TPU-V6E-per-project-region limit 16" in lines["tpu quota"], lines


def test_flex_start_is_judged_by_the_preemptible_quota_while_the_project_has_one(
    box, facts, preflight
):
    """Flex-start consumes preemptible quota, and the on-demand quota only in a project with
    none (Compute Engine's provisioning models page): 16 preemptible chips beside 1024
    on-demand fail the check, as GKE would find the preemptible quota short."""
    facts.quota_infos["PREEMPTIBLE-TPU-V6E-per-project-region"] = [({}, 16)]
    facts.quota_infos["TPUS-PER-TPU-FAMILY-per-project-region"] = [({"tpu_family": "CT6E"}, 1024)]
    conf = {**SETTINGS, "capacity": "flex_start", "reservation": ""}
    status, lines = preflight(conf)
    assert status == 1 and set(failures(lines)) == {"tpu quota"}, lines
    assert "flex_start consumes preemptible quota" in lines["tpu quota"], lines
    assert "PREEMPTIBLE-TPU-V6E-per-project-region limit 16" in lines["tpu quota"], lines
    # no preemptible quota at all: the on-demand family quota is the one consumed
    facts.quota_infos["PREEMPTIBLE-TPU-V6E-per-project-region"] = [({}, 0)]
    status, lines = preflight(conf)
    assert status == 0, lines
    assert "on-demand quota (no preemptible quota in the project)" in lines["tpu quota"], lines
    assert "TPUS-PER-TPU-FAMILY-per-project-region limit 1024" in lines["tpu quota"], lines


def test_every_rung_of_the_ladder_is_checked(box, facts, preflight):
    """A later rung's quota and zone are checked, not the first's only."""
    facts.quota_infos["PREEMPTIBLE-TPU-V6E-per-project-region"] = [({}, 0)]
    ladder = "reservation@us-east5-b, spot@us-east5-a"
    status, lines = preflight({**SETTINGS, "capacity_ladder": ladder})
    assert status == 1, lines
    assert set(failures(lines)) == {"tpu quota (spot@us-east5-a)"}, lines
    assert (
        "PASS reservation (reservation@us-east5-b)" in lines["reservation (reservation@us-east5-b)"]
    )
    assert "tpu in zone (spot@us-east5-a)" in lines


@pytest.mark.parametrize(
    ("model", "tpu_type", "chips"), [("gpt-oss-20b", "v5p-64", 32), ("llama3.1-70b", "v5p-128", 64)]
)
def test_a_v5p_spot_run_is_checked_against_v5p_quota(box, facts, preflight, model, tpu_type, chips):
    """A v5p run's quota is v5p's own PREEMPTIBLE-TPU-V5P (the sandbox grants 64),
    not v6e's, and its machine type is looked for in its zone."""
    facts.quota_infos["PREEMPTIBLE-TPU-V6E-per-project-region"] = [({}, 1024)]
    conf = {**SETTINGS, "capacity": "spot", "reservation": "", "zone": "us-east5-a",
            "model_name": model, "tpu_type": tpu_type}  # fmt: skip
    status, lines = preflight(conf)
    quota = lines["tpu quota"]
    assert "PREEMPTIBLE-TPU-V5P-per-project-region limit 64" in quota, lines
    assert "V6E" not in quota and f"{chips} chips" in quota, quota
    assert "ct5p-hightpu-4t offered in us-east5-a" in lines["tpu in zone"], lines
    assert status == 0, lines
    facts.quota_infos["PREEMPTIBLE-TPU-V5P-per-project-region"] = [({}, 16)]
    status, lines = preflight(conf)
    assert status == 1 and set(failures(lines)) == {"tpu quota"}, lines
    assert "filter on PREEMPTIBLE-TPU-V5P-per-project-region" in lines["tpu quota"], lines


def test_a_tpu7x_run_is_checked_against_its_preemptible_quota(box, facts, preflight):
    """TPU7x's quota is checked too: Spot and flex-start read its
    PREEMPTIBLE-TPU7X quota (the sandbox grants 64 chips: tpu7x-128 is 64), and a flex-start
    slice in a project without it says the on-demand id is not public."""
    conf = {**SETTINGS, "capacity": "spot", "reservation": "", "zone": "us-east5-a",
            "model_name": "qwen3-30b-a3b-base", "tpu_type": "tpu7x-128"}  # fmt: skip
    status, lines = preflight(conf)
    assert status == 0, lines
    assert "PREEMPTIBLE-TPU7X-per-project-region limit 64; 64 chips" in lines["tpu quota"], lines
    facts.quota_infos["PREEMPTIBLE-TPU7X-per-project-region"] = [({}, 32)]
    status, lines = preflight(conf)
    assert status == 1 and set(failures(lines)) == {"tpu quota"}, lines
    facts.quota_infos["PREEMPTIBLE-TPU7X-per-project-region"] = [({}, 0)]
    status, lines = preflight({**conf, "capacity": "flex_start"})
    assert status == 0, lines
    assert "Cloud Quotas id for tpu7x is not public" in lines["tpu quota"], lines
