"""`make deploy-composer` (tools/deploy_composer.py) against fake gcloud and twine that keep
what a deploy creates: the whole sequence, what a second run skips, the dry run."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.delivery import (
    FAKES,
    PREFIX,
    RSYNC_FLAGS,
    VERSION,
    WHEEL_NAME,
    calls,
    fake_env,
    make,
)


def deploy(
    tmp_path: Path, *args: str, wheel_name: str = WHEEL_NAME, **env: str
) -> subprocess.CompletedProcess:
    """tools.deploy_composer with a (fake) wheel built elsewhere, as `make deploy-composer WHEEL=`
    runs it: no build."""
    wheel = tmp_path / wheel_name
    wheel.touch()
    return subprocess.run(
        [sys.executable, "-m", "tools.deploy_composer", *args, "--wheel", str(wheel)],
        cwd=REPO,
        env=fake_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=60,
    )


CREATE = ["artifacts", "repositories", "create", "tpu-rl-airflow", "--repository-format=python"]
GRANT = ["artifacts", "repositories", "add-iam-policy-binding", "tpu-rl-airflow"]
VERSION_DESCRIBE = [
    *f"artifacts versions describe {VERSION} --package=tpu-rl-airflow".split(),
    "--repository=tpu-rl-airflow",
]
INSTALL = f"--update-pypi-package=tpu-rl-airflow=={VERSION}"
DAG_IMPORT = ["composer", "environments", "storage", "dags", "import", "--environment", "my-env"]


def first_deploy(*where: str, project: str = "fake-project") -> list[list[str]]:
    """The gcloud calls of a deploy to an environment that has never had this version: every
    check finds nothing, so everything is created, uploaded and installed (twine between the
    token and the pip.conf is logged apart)."""
    at = ["--location", "us-central1", "--project", project]
    member = f"--member=serviceAccount:composer@{project}.iam.gserviceaccount.com"
    return [
        ["composer", "environments", "describe", "my-env", *where, "--format=json"],
        ["artifacts", "repositories", "describe", "tpu-rl-airflow", *at],
        [*CREATE, *at, "--description=tpu-rl-airflow wheels for Cloud Composer"],
        [*GRANT, *at, member, "--role=roles/artifactregistry.reader"],
        [*VERSION_DESCRIBE, *at],
        ["auth", "print-access-token"],
        ["storage", "cat", f"{PREFIX}/config/pip/pip.conf"],
        ["storage", "cp", "PIP_CONF", f"{PREFIX}/config/pip/pip.conf"],
        ["composer", "environments", "update", "my-env", *where, INSTALL],
        ["storage", "ls", f"{PREFIX}/plugins/tpu_rl/"],
        *dag_imports(*where),
        ["storage", "rsync", "include", f"{PREFIX}/data/tpu_rl_airflow/include", *RSYNC_FLAGS],
    ]


def dag_imports(*where: str) -> list[list[str]]:
    return [
        [*DAG_IMPORT, *where, "--source", f"dags/{name}", "--destination", "tpu_rl_airflow"]
        for name in ("tpu_rl_janitor.py", "tpu_rl_post_training.py")
    ]


def gcloud_argvs(tmp_path: Path) -> list[list[str]]:
    """The fake gcloud's calls; a local file copied to the bucket shows as PIP_CONF."""
    argvs = [c["argv"] for c in calls(tmp_path / "gcloud.jsonl")]
    for argv in argvs:
        if argv[:2] == ["storage", "cp"]:
            assert Path(argv[2]).name == "pip.conf"
            argv[2] = "PIP_CONF"
    return argvs


def pip_conf(tmp_path: Path) -> str:
    state = json.loads((tmp_path / "cloud-state.json").read_text())
    return state["objects"][f"{PREFIX}/config/pip/pip.conf"]


def test_deploy_dry_run_prints_every_command_and_runs_none(tmp_path):
    done = make(
        tmp_path,
        *("deploy-composer", "ENV=my-env", "LOCATION=us-central1", "PROJECT=my-project"),
        "DRY_RUN=1",
    )

    assert done.returncode == 0, done.stderr
    assert calls(tmp_path / "gcloud.jsonl") == calls(tmp_path / "twine.jsonl") == []
    printed = [
        shlex.split(line[2:].split("   # ")[0])  # the command, not its note
        for line in done.stdout.splitlines()
        if line.startswith("+ ")
    ]
    stand_ins = {
        PREFIX: "gs://BUCKET-OF-my-env",
        "composer@my-project.iam.gserviceaccount.com": ("SERVICE-ACCOUNT-OF-my-env"),
    }
    expected = []
    for argv in first_deploy(
        "--location", "us-central1", "--project", "my-project", project="my-project"
    ):
        line = json.dumps(["gcloud", *argv])
        for real, stand_in in stand_ins.items():
            line = line.replace(real, stand_in)
        expected.append(json.loads(line))
    # the build first; the upload after the token; the old plugins copy removed if found
    expected.insert(0, ["make", "--no-print-directory", "dist"])
    index = "https://us-central1-python.pkg.dev/my-project/tpu-rl-airflow/"
    upload = ["twine", "upload", "--non-interactive", "--repository-url", index]
    expected.insert(7, [*upload, f"{REPO}/dist/{WHEEL_NAME}"])
    folder = "gs://BUCKET-OF-my-env/plugins/tpu_rl/"
    expected.insert(
        expected.index(["gcloud", "storage", "ls", folder]) + 1,
        ["gcloud", "storage", "rm", "--recursive", folder],
    )
    for argv in printed:
        if argv[:3] == ["gcloud", "storage", "cp"]:
            argv[3] = "PIP_CONF"
    assert printed == expected
    index = "https://us-central1-python.pkg.dev/my-project/tpu-rl-airflow/simple/"
    assert f"[global]\nextra-index-url = {index}\n" in done.stdout  # the pip.conf it would write
    assert "DRY_RUN=1: nothing was run" in done.stdout


@pytest.mark.parametrize(
    ("args", "where", "project"),
    [
        (
            ["my-env", "us-central1", "--project", "my-project"],
            ["--location", "us-central1", "--project", "my-project"],
            "my-project",
        ),
        (["my-env", "us-central1"], ["--location", "us-central1"], "fake-project"),
    ],
)
def test_deploy_creates_uploads_points_pip_installs_and_imports_the_dags(
    tmp_path, args, where, project
):
    done = deploy(tmp_path, *args)

    assert done.returncode == 0, done.stderr
    assert gcloud_argvs(tmp_path) == first_deploy(*where, project=project)
    (upload,) = calls(tmp_path / "twine.jsonl")
    index = f"https://us-central1-python.pkg.dev/{project}/tpu-rl-airflow/"
    wheel = str(tmp_path / WHEEL_NAME)
    assert upload["argv"] == ["upload", "--non-interactive", "--repository-url", index, wheel]
    assert (upload["username"], upload["password"]) == (
        "oauth2accesstoken",
        "ya29.fake-access-token",
    )
    assert "ya29" not in done.stdout + done.stderr  # the token is in no argument or output
    assert pip_conf(tmp_path) == f"[global]\nextra-index-url = {index}simple/\n\n"
    assert "+ gcloud composer environments update my-env" in done.stdout  # printed as it runs
    assert "Removed" not in done.stdout


def test_deploy_again_is_safe_it_creates_uploads_and_installs_nothing(tmp_path):
    assert deploy(tmp_path, "my-env", "us-central1").returncode == 0
    (tmp_path / "gcloud.jsonl").unlink()

    done = deploy(tmp_path, "my-env", "us-central1")

    assert done.returncode == 0, done.stderr
    where = ["--location", "us-central1"]
    at = [*where, "--project", "fake-project"]
    member = "--member=serviceAccount:composer@fake-project.iam.gserviceaccount.com"
    assert gcloud_argvs(tmp_path) == [
        ["composer", "environments", "describe", "my-env", *where, "--format=json"],
        ["artifacts", "repositories", "describe", "tpu-rl-airflow", *at],
        [*GRANT, *at, member, "--role=roles/artifactregistry.reader"],
        [*VERSION_DESCRIBE, *at],
        ["storage", "cat", f"{PREFIX}/config/pip/pip.conf"],
        ["storage", "ls", f"{PREFIX}/plugins/tpu_rl/"],
        *dag_imports(*where),
        ["storage", "rsync", "include", f"{PREFIX}/data/tpu_rl_airflow/include", *RSYNC_FLAGS],
    ]
    assert len(calls(tmp_path / "twine.jsonl")) == 1  # the first run's upload only
    assert f"tpu-rl-airflow {VERSION} is already in" in done.stdout
    assert "raise the version in pyproject.toml" in done.stdout
    assert f"tpu-rl-airflow=={VERSION} is already installed: no environment update." in done.stdout


def test_deploy_removes_the_plugins_copy_the_old_deploy_left_after_installing(tmp_path):
    old = {f"{PREFIX}/plugins/tpu_rl/{name}": "x" for name in ("__init__.py", "plan.py")}
    other = {f"{PREFIX}/plugins/their_plugin.py": "y"}
    (tmp_path / "cloud-state.json").write_text(json.dumps({"objects": {**old, **other}}))

    done = deploy(tmp_path, "my-env", "us-central1")

    assert done.returncode == 0, done.stderr
    argvs = gcloud_argvs(tmp_path)
    rm = ["storage", "rm", "--recursive", f"{PREFIX}/plugins/tpu_rl/"]
    update = [argv for argv in argvs if argv[:3] == ["composer", "environments", "update"]]
    assert argvs.index(rm) == argvs.index(update[0]) + 2  # after the install and the ls
    state = json.loads((tmp_path / "cloud-state.json").read_text())
    assert [k for k in state["objects"] if "/plugins/" in k] == list(other)
    assert (
        f"Removed {PREFIX}/plugins/tpu_rl/, the copy an older deploy-composer left" in done.stdout
    )


def test_deploy_adds_the_repository_to_an_existing_pip_conf(tmp_path):
    theirs = "[global]\nextra-index-url = https://example.com/simple/\ntimeout = 60\n"
    state = {"objects": {f"{PREFIX}/config/pip/pip.conf": theirs}}
    (tmp_path / "cloud-state.json").write_text(json.dumps(state))

    assert deploy(tmp_path, "my-env", "us-central1").returncode == 0

    ours = "https://us-central1-python.pkg.dev/fake-project/tpu-rl-airflow/simple/"
    assert pip_conf(tmp_path) == (
        f"[global]\nextra-index-url = https://example.com/simple/\n\t{ours}\ntimeout = 60\n\n"
    )


def test_deploy_stops_on_an_error_that_is_not_missing_and_overwrites_nothing(tmp_path):
    done = deploy(tmp_path, "my-env", "us-central1", FAKE_GCLOUD_DENY="storage cat")

    assert done.returncode == 1
    assert "PERMISSION_DENIED" in done.stderr
    assert gcloud_argvs(tmp_path)[-1][:2] == ["storage", "cat"]  # no pip.conf written


def test_deploy_refuses_a_wheel_of_another_version(tmp_path):
    done = deploy(
        tmp_path, "my-env", "us-central1", wheel_name="tpu_rl_airflow-9.9.9-py3-none-any.whl"
    )

    assert done.returncode == 1
    assert f"pyproject.toml says version {VERSION}" in done.stderr
    assert calls(tmp_path / "gcloud.jsonl") == []


@pytest.mark.parametrize("count", ["0", ""])
def test_deploy_stops_without_a_triggerer(tmp_path, count):
    done = deploy(tmp_path, "my-env", "us-central1", FAKE_TRIGGERER_COUNT=count)

    assert done.returncode == 1
    assert "has no triggerer" in done.stderr
    assert "--triggerer-count 1" in done.stderr
    assert len(calls(tmp_path / "gcloud.jsonl")) == 1  # the describe, nothing created


def test_deploy_rejects_an_unexpected_bucket_prefix(tmp_path):
    done = deploy(tmp_path, "my-env", "us-central1", FAKE_DAG_GCS_PREFIX="")

    assert done.returncode == 1
    assert "unexpected dagGcsPrefix" in done.stderr


def test_deploy_stops_before_any_change_without_twine(tmp_path):
    path = f"{tmp_path / 'bin'}:{os.environ['PATH']}"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "gcloud").symlink_to(FAKES / "gcloud")
    done = deploy(tmp_path, "my-env", "us-central1", PATH=path)

    assert done.returncode == 1
    assert "twine is not on PATH" in done.stderr
    assert calls(tmp_path / "gcloud.jsonl") == []


def test_deploy_usage(tmp_path):
    done = make(tmp_path, "deploy-composer", "ENV=my-env")
    assert done.returncode == 2
    assert "usage: make deploy-composer" in done.stdout
    assert calls(tmp_path / "gcloud.jsonl") == []


@pytest.mark.parametrize(
    "quote",
    [
        pytest.param('x"; touch {marker}; "', id="double-quote"),
        pytest.param("x`touch {marker}`", id="backquote"),
        pytest.param("x'; touch {marker}; '", id="single-quote"),
        pytest.param("x$(shell touch {marker})", id="make-function"),
    ],
)
def test_deploy_runs_nothing_an_environment_name_holds_and_refuses_it(tmp_path, quote):
    marker = tmp_path / "pwned"
    done = make(
        tmp_path,
        *("deploy-composer", f"ENV={quote.format(marker=marker)}", "LOCATION=us-central1"),
        "DRY_RUN=1",
    )

    assert not marker.exists(), "a command in ENV ran on the deployer's machine"
    assert done.returncode != 0, done.stdout + done.stderr  # make's 2 for a failed recipe
    # Composer's rule for an environment ID (composer.v1 discovery document, Environment.name)
    assert "must start with a lowercase letter followed by up to 63" in done.stderr
    assert "+ " not in done.stdout  # nothing printed as run, nothing run
    assert calls(tmp_path / "gcloud.jsonl") == []


@pytest.mark.parametrize(
    ("variable", "value", "rule"),
    [
        ("ENV", "My-Env", "must start with a lowercase letter followed by up to 63"),
        ("ENV", "my-env-", "cannot end with a hyphen"),
        ("ENV", "e" * 65, "up to 63"),
        ("LOCATION", "us central1", "a region name"),
        ("PROJECT", "my project", "6 to 30 lowercase ASCII letters"),
        ("PROJECT", "short", "6 to 30 lowercase ASCII letters"),
        ("REPOSITORY", "Wheels_1", "lowercase letters, numbers and hyphens"),
    ],
)
def test_deploy_refuses_a_name_google_cloud_cannot_have(tmp_path, variable, value, rule):
    names = {"ENV": "my-env", "LOCATION": "us-central1", "PROJECT": "my-project"}
    names[variable] = value
    done = make(tmp_path, "deploy-composer", *(f"{k}={v}" for k, v in names.items()), "DRY_RUN=1")

    assert done.returncode != 0, done.stdout + done.stderr  # make's 2 for a failed recipe
    assert rule in done.stderr
    assert repr(value) in done.stderr
    assert "+ " not in done.stdout


def test_deploy_accepts_the_longest_environment_name_composer_allows(tmp_path):
    done = deploy(tmp_path, "e" * 64, "us-central1", "--dry-run")

    assert done.returncode == 0, done.stderr
