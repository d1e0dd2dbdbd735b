"""`make plan`: the tutorial's settings rendered offline, checked against the tutorial's text."""

from __future__ import annotations

import inspect
import json
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.conftest import PIPELINE, REPO, SEED, TUTORIAL_CONF
from tests.schemas import validate_manifest
from tests.tutorial_text import as_mapping, same_value, tutorial_python_flags
from tpu_rl.plan import main, step_docs

TUTORIAL_MODULES = {
    "convert": "maxtext.checkpoint_conversion.to_maxtext",
    "train": "maxtext.trainers.post_train.rl.train_rl",
    "export": "maxtext.checkpoint_conversion.to_huggingface",
}
PER_RUN_FLAGS = {"run_name", "load_parameters_path", "base_output_directory"}


def render(tmp_path, conf=TUTORIAL_CONF) -> dict:
    assert main([str(conf), str(tmp_path)]) == 0
    return json.loads((tmp_path / "plan.json").read_text())


def test_plan_lists_the_pipeline_in_order(tmp_path):
    ids = [step["id"] for step in render(tmp_path)["steps"]]
    assert ids == [
        *PIPELINE[: PIPELINE.index("gate")],
        "evaluate_champion",
        "stop_backend",
        "evaluate_heldout",
        "gate",
        "export",
        "verify",
        "compare_champion",
        "cleanup_kubernetes",
        "cleanup_cluster",
        "approve",
        "promote",
    ]
    assert all(
        step["description"] and "\n" not in step["description"]
        for step in render(tmp_path)["steps"]
    )


def test_each_steps_text_is_its_operators_step_doc_then_this_runs_details(tmp_path):
    """One text per step: the plan reads each operator's `step_doc` (the task's doc in the UI)
    from the operators' source, without importing Airflow; its first paragraph, then the run's
    details."""
    from tests.run_steps import RUN_STEPS

    first = {
        step.step_id: " ".join(inspect.cleandoc(step.step_doc).split("\n\n")[0].split())
        for step in RUN_STEPS
    }
    assert step_docs() == first
    for step in render(tmp_path)["steps"]:
        assert step["description"].startswith(first[step["id"]]), step["id"]
    steps = {s["id"]: s["description"] for s in render(tmp_path)["steps"]}
    assert steps["ensure_bucket"].endswith(" This run: gs://my-tpu-project-rl in us-east5.")
    assert steps["start_backend"].endswith(" This run: a v6e-32 slice (4x8).")


def test_a_step_doc_whose_first_paragraph_is_not_all_text_is_refused():
    import ast

    from tpu_rl.plan import _first_paragraph

    doc = ast.parse('f"""\nDeletes the {kinds} of the run.\n\nMore.\n"""').body[0].value
    with pytest.raises(ValueError, match=r"Cleanup\.step_doc: its first paragraph is not all text"):
        _first_paragraph(doc, "Cleanup.step_doc")
    later = ast.parse('f"""\nDeletes the objects.\n\nThe {kinds}.\n"""').body[0].value
    assert _first_paragraph(later, "Cleanup.step_doc") == "Deletes the objects."


def test_the_verdict_comes_before_the_price_lists(tmp_path, capsys):
    """The verdict is the first line, above the price list."""
    render(tmp_path)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "Verdict: the settings are valid; reservation in us-east5: no spend of the run's own: "
        "the reservation's commitment, paid whether or not the pool exists (per committed "
        "chip-hour: 1y $1.89 (list price), 3y $1.22 (list price); 32 chips at 1-year: $1,451.52 "
        "a day)"
    )
    assert lines.index(next(x for x in lines if x.startswith("Estimate for"))) > 0


def test_every_rendered_object_is_written_and_valid(tmp_path):
    plan = render(tmp_path)
    files = [step["object"] for step in plan["steps"] if "object" in step]
    assert len(files) == 6  # evaluate_champion's Job too
    for name in files:
        validate_manifest(yaml.safe_load((tmp_path / name).read_text()))
    assert (tmp_path / "blueprint.yaml").exists() and (tmp_path / "deployment.yaml").exists()


def test_maxtext_commands_match_the_tutorial_flag_by_flag(tmp_path, tutorial_conf):
    steps = {s["id"]: s for s in render(tmp_path)["steps"]}
    variables = {
        "MODEL_NAME": tutorial_conf["model_name"],
        "GCS_BUCKET": tutorial_conf["gcs_bucket"],
        "HF_TOKEN": "${HF_TOKEN}",
    }
    for step_id, module in TUTORIAL_MODULES.items():
        argv = steps[step_id]["argv"]
        assert argv[:3] == ["python3", "-m", module]
        ours, theirs = as_mapping(argv[3:]), as_mapping(tutorial_python_flags(module, variables))
        # the run passes checkpoint_period 25, which the tutorial leaves at rl.yml's 50 (its
        # last step only: nothing to resume from)
        added = {"checkpoint_period": "25"} if step_id == "train" else {}
        assert set(ours) == set(theirs) | set(added), (step_id, set(ours) ^ set(theirs))
        assert all(ours[key] == value for key, value in added.items())
        for key in set(theirs) - PER_RUN_FLAGS:
            assert same_value(ours[key], theirs[key]), (step_id, key)
        # the object submitted runs exactly this command
        manifest = yaml.safe_load((tmp_path / steps[step_id]["object"]).read_text())
        shell_line = manifest["spec"]["template"]["spec"]["containers"][0]["command"][2]
        assert f"python3 -m {module} " in shell_line


def test_gcluster_deploy_matches_the_tutorial_flag_by_flag(tmp_path, tutorial_conf):
    deploy = next(s for s in render(tmp_path)["steps"] if s["id"] == "create_cluster")["argv"]
    text = SEED.read_text()
    line = re.search(r'--vars "([^"]+)"', text).group(1)
    names = {
        "PROJECT": "project",
        "CLUSTER_NAME": "cluster_name",
        "REGION": "region",
        "ZONE": "zone",
        "CLUSTER_NODEPOOL_COUNT": "cluster_nodepool_count",
        "TOPOLOGY": "topology",
        "RESERVATION": "reservation",
    }
    expected_vars = re.sub(
        r"\$\{(\w+)(:[?-])?\}", lambda m: str(tutorial_conf[names[m.group(1)]]), line
    )
    assert deploy[deploy.index("--vars") + 1] == expected_vars
    assert deploy[-4:] == ["-l", "IGNORE", "--auto-approve", "-w"]
    cleanup = next(s for s in render(tmp_path)["steps"] if s["id"] == "cleanup_cluster")["argv"]
    assert cleanup[1:] == ["destroy", tutorial_conf["cluster_name"], "--auto-approve"]


def test_existing_cluster_plan_neither_creates_nor_destroys(tmp_path):
    conf = tmp_path / "existing.json"
    conf.write_text((REPO / "include/examples/existing-cluster-retrain.json").read_text())
    steps = {s["id"]: s for s in render(tmp_path / "out", conf)["steps"]}
    assert (
        "argv" not in steps["create_cluster"]
        and "existing" in steps["create_cluster"]["description"]
    )
    assert "argv" not in steps["cleanup_cluster"]
    assert steps["train"]["argv"][-1] == "num_test_batches=8"


def test_invalid_file_exits_non_zero_listing_every_error(tmp_path):
    conf = tmp_path / "bad.json"
    conf.write_text(
        json.dumps(
            {
                **json.loads(TUTORIAL_CONF.read_text()),
                "cluster_name": "Bad",
                "batch_size": 3,
                "nope": 1,
            }
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "tpu_rl.plan", str(conf), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO / "plugins")},
        check=False,
    )
    assert proc.returncode == 1
    assert "3 invalid setting(s)" in proc.stderr
    for name in ("nope:", "cluster_name:", "train_micro_batch_size:"):
        assert name in proc.stderr
    assert not (tmp_path / "out").exists()


def test_plan_needs_no_credentials_airflow_or_network(tmp_path):
    """A clean process with no Google variables, a dead proxy, and Airflow never imported."""
    code = (
        "import sys, tpu_rl.plan as p; rc = p.main(sys.argv[1:]); "
        "print('airflow-imported' if 'airflow' in sys.modules else 'no-airflow'); sys.exit(rc)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(TUTORIAL_CONF), str(tmp_path)],
        capture_output=True,
        text=True,
        env={
            "PYTHONPATH": str(REPO / "plugins"),
            "HOME": str(tmp_path),
            "https_proxy": "http://127.0.0.1:9",
        },
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("no-airflow")


def test_plan_shows_the_clients_storage_identity(tmp_path):
    plan = render(tmp_path)
    train = next(step for step in plan["steps"] if step["id"] == "train")
    assert "the node pool's service account" in train["description"]
    spec = yaml.safe_load((tmp_path / train["object"]).read_text())["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["nodeSelector"] == {"cloud.google.com/gke-nodepool": "cpu-np"}


def test_the_blueprint_is_found_in_composers_data_folder_too(tmp_path, monkeypatch):
    import tpu_rl.include_files as include_files

    composer = tmp_path / "data" / "include"
    shutil.copytree(REPO / "include", composer)
    monkeypatch.setattr(include_files, "include_dirs", lambda: [tmp_path / "none", composer])
    assert include_files.include_file(include_files.PLAN_BLUEPRINT).parent.parent == composer
    assert render(tmp_path / "out")["steps"][3]["id"] == "create_cluster"  # after preflight


def test_a_missing_include_folder_is_a_clear_error(tmp_path, monkeypatch, capsys):
    import tpu_rl.include_files as include_files

    monkeypatch.setattr(include_files, "include_dirs", lambda: [tmp_path / "a", tmp_path / "b"])
    assert main([str(TUTORIAL_CONF), str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "include/cluster-toolkit/blueprint.yaml not found" in err and str(tmp_path / "b") in err


def test_the_plan_shows_the_kueue_configuration_covering_the_backend(tmp_path):
    render(tmp_path)
    text = (tmp_path / "kueue-configuration.yaml.tftpl").read_text()
    (queue,) = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "ClusterQueue"]
    assert queue["spec"]["resourceGroups"][0]["coveredResources"] == [
        "google.com/tpu",
        "cpu",
        "memory",
    ]


def test_a_run_with_heldout_evaluation_shows_its_job_and_the_models_it_scores(tmp_path):
    out = tmp_path / "out"
    steps = render(out, REPO / "include/examples/heldout.json")["steps"]
    [step] = [s for s in steps if s["id"] == "evaluate_heldout"]
    assert step["description"].endswith(
        "This run: gsm8k, arc_easy for the best 2 committed step(s) (step 50 shown), the base "
        "model and the champion."
    )
    job = yaml.safe_load((out / step["object"]).read_text())
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert [line.split("--run_name=")[1].split()[0] for line in script.split(" && ")] == [
        "step-50",
        "base",
        "champion",
    ]
