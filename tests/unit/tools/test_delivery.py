"""Delivery: docker-compose.yaml, the Dockerfile, `make airflow`, `make deploy-composer` and
the delivery commands of docs/deployment.md, checked without Docker or Google Cloud (fake
gcloud, twine, docker and curl from tests/unit/tools/delivery_bin), against requirements.txt,
pyproject.toml and the settings' defaults."""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from tests.conftest import REPO
from tests.support.delivery import (
    FAKES,
    VERSION,
    WHEEL_NAME,
    calls,
    fake_env,
    make,
)
from tpu_rl.cluster import blueprint
from tpu_rl.cluster import toolkit as cluster_toolkit
from tpu_rl.settings.run_settings import RunSettings

AIRFLOW_SERVICES = {
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "airflow-init",
}
ADC_DIR = "/home/airflow/.config/gcloud"


# ---------- helpers ----------


def pins(section: str) -> dict[str, str]:
    """name -> version of every `name==version` line."""
    found = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", section, flags=re.M)
    return {name.lower(): version for name, version in found}


def runtime_pins() -> dict[str, str]:
    """requirements.txt's pins above the test tools."""
    text = (REPO / "requirements.txt").read_text()
    return pins(text.split("# test and dev tools")[0])


def python_version() -> str:
    text = (REPO / "pyproject.toml").read_text()
    return re.search(r'requires-python = ">=(\d+\.\d+),', text).group(1)


def dockerfile(stage: int = -1) -> list[tuple[str, str]]:
    """(instruction, arguments) pairs of one build stage (default the last, the image), as Docker
    reads them: comments dropped, lines continued; a stage starts at its FROM."""
    lines = [
        line for line in (REPO / "Dockerfile").read_text().splitlines() if not line.startswith("#")
    ]
    joined = "\n".join(lines).replace("\\\n", "")
    stages: list[list[tuple[str, str]]] = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.partition(" ")
            if word == "FROM":
                stages.append([])
            stages[-1].append((word, rest.strip()))
    return stages[stage]


def base_image() -> str:
    ((base,),) = [args.split() for word, args in dockerfile() if word == "FROM"]
    return base


def dockerfile_args() -> dict[str, str]:
    pairs = [args.split("=", 1) for word, args in dockerfile() if word in ("ARG", "ENV")]
    return dict(pairs)


def root_run() -> str:
    """The RUN that installs terraform and the Cluster Toolkit bundle."""
    (run,) = [args for word, args in dockerfile() if word == "RUN" and "gcluster" in args]
    return run


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default}, ${VAR:?error} and $$."""

    def one(match: re.Match) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if op == "?":
            raise KeyError(f"{name}: {arg}")
        return arg or ""

    parts = value.split("$$")
    pattern = r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([-?])([^}]*))?\}"
    return "$".join(re.sub(pattern, one, part) for part in parts)


def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yaml").read_text())


def delivery_section() -> str:
    """docs/deployment.md's delivery part: docker compose, `make airflow`, Cloud Composer."""
    text = (REPO / "docs" / "deployment.md").read_text()
    start, end = "<!-- delivery:start -->", "<!-- delivery:end -->"
    return text[text.index(start) + len(start) : text.index(end)]


# ---------- the image ----------


def test_dockerfile_image_and_pins_match_requirements():
    runtime = runtime_pins()
    assert base_image() == f"apache/airflow:{runtime['apache-airflow']}-python{python_version()}"
    (install,) = [args for word, args in dockerfile() if word == "RUN" and "pip install" in args]
    installed = pins("\n".join(re.findall(r'"([^"]+==[^"]+)"', install)))
    assert installed == runtime  # airflow kept at the image's version, no test tools
    assert "_PIP_ADDITIONAL_REQUIREMENTS" not in (REPO / "docker-compose.yaml").read_text()
    assert [word for word, _ in dockerfile()][-4:] == ["USER", "COPY", "COPY", "RUN"]  # as airflow
    assert ("USER", "airflow") in dockerfile()
    # every dependency at the lock's version, checked after the install
    assert ("COPY", "requirements.lock scripts/check_locked.py /opt/tpu-rl/") in dockerfile()
    assert "pip install --no-cache-dir --constraint /opt/tpu-rl/requirements.lock " in install
    assert " /opt/tpu-rl/dist/tpu_rl_airflow-*-py3-none-any.whl " in install  # with the pins
    assert install.endswith("&& python /opt/tpu-rl/check_locked.py /opt/tpu-rl/requirements.lock")


def test_dockerfile_builds_the_wheel_in_a_stage_and_the_image_installs_only_the_wheel():
    """tpu_rl reaches the image as the wheel (site-packages, every process), never as a copy
    of plugins/: the build stage builds it as `make dist` does, on the same official image."""
    build = dockerfile(0)
    assert build[0] == ("FROM", f"{base_image()} AS wheel")
    assert ("COPY", "--chown=airflow:0 pyproject.toml /home/airflow/src/") in build
    assert ("COPY", "--chown=airflow:0 plugins/tpu_rl /home/airflow/src/plugins/tpu_rl") in build
    (wheel,) = [args for word, args in build if word == "RUN"]
    assert wheel == "pip wheel --no-cache-dir --no-deps -w /home/airflow/dist /home/airflow/src"
    image = dockerfile()
    copies = [args for word, args in image if word in ("COPY", "ADD")]
    assert copies == [
        "requirements.lock scripts/check_locked.py /opt/tpu-rl/",
        "--from=wheel /home/airflow/dist/ /opt/tpu-rl/dist/",
    ]
    assert not any("plugins" in args for args in copies)


def test_check_locked_passes_on_the_locked_venv_and_names_a_drifted_package(tmp_path):
    check = [sys.executable, str(REPO / "scripts" / "check_locked.py")]
    lock = REPO / "requirements.lock"
    assert subprocess.run([*check, str(lock)], capture_output=True).returncode == 0
    drifted = tmp_path / "requirements.lock"
    drifted.write_text(re.sub(r"^pytest==\S+$", "pytest==0.0.1", lock.read_text(), flags=re.M))
    done = subprocess.run([*check, str(drifted)], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr == f"pytest: {metadata.version('pytest')} installed, 0.0.1 locked\n"


def test_dockerfile_versions_match_settings_and_the_delivery_doc():
    args = dockerfile_args()
    assert args["CLUSTER_TOOLKIT_VERSION"] == RunSettings().cluster_toolkit_version
    assert re.fullmatch(r"\d+\.\d+\.\d+", args["TERRAFORM_VERSION"])
    doc = delivery_section()
    assert f"Terraform {args['TERRAFORM_VERSION']}" in doc
    assert f"Cluster Toolkit {args['CLUSTER_TOOLKIT_VERSION']}" in doc
    assert f"Airflow {runtime_pins()['apache-airflow']}" in doc


def build_fixtures(root: Path, terraform_version: str, toolkit_version: str, arch: str) -> None:
    """What HashiCorp and GitHub would serve: a terraform zip, its SHA256SUMS, a gcluster bundle."""
    root.mkdir()
    zip_name = f"terraform_{terraform_version}_linux_{arch}.zip"
    with zipfile.ZipFile(root / zip_name, "w") as z:
        z.writestr("terraform", f"#!/bin/sh\necho Terraform v{terraform_version}\n")
        z.writestr("LICENSE.txt", "license")
    digest = hashlib.sha256((root / zip_name).read_bytes()).hexdigest()
    (root / f"terraform_{terraform_version}_SHA256SUMS").write_text(
        f"{'0' * 64}  terraform_{terraform_version}_darwin_{arch}.zip\n{digest}  {zip_name}\n"
    )
    write_bundle(root / f"gcluster_bundle_linux_{arch}.tgz")


def write_bundle(path: Path) -> str:
    """A gcluster bundle as the release serves it; returns its sha256."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text, mode in [
            ("gcluster", "#!/bin/sh\n", 0o755),
            (blueprint.BUNDLE_BLUEPRINT, "blueprint_name: x\n", 0o644),
        ]:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(text), mode
            tar.addfile(info, io.BytesIO(text.encode()))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bundle_sha(tmp_path: Path) -> str:
    return hashlib.sha256(
        (tmp_path / "www" / "gcluster_bundle_linux_amd64.tgz").read_bytes()
    ).hexdigest()


def run_root_step(tmp_path: Path, bundle_sha256: str) -> subprocess.CompletedProcess:
    """The Dockerfile's terraform + bundle RUN, with fake curl and /usr/local/bin in tmp_path."""
    args = dockerfile_args()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = fake_env(
        tmp_path,
        FAKE_CURL_ROOT=str(tmp_path / "www"),
        PATH=f"{FAKES}:{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        TERRAFORM_VERSION=args["TERRAFORM_VERSION"],
        CLUSTER_TOOLKIT_VERSION=args["CLUSTER_TOOLKIT_VERSION"],
        GCLUSTER_BUNDLE_SHA256=bundle_sha256,
        AIRFLOW__TPU_RL__GCLUSTER_CACHE_DIR=str(tmp_path / "cache"),
    )
    script = root_run().replace("/usr/local/bin", str(bin_dir))
    shell = ["bash", "-o", "pipefail", "-o", "errexit", "-o", "nounset", "-c", script]
    return subprocess.run(shell, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="fixtures are built for amd64")
def test_dockerfile_installs_terraform_and_the_bundle_where_ensure_bundle_reads_it(tmp_path):
    args = dockerfile_args()
    version = args["CLUSTER_TOOLKIT_VERSION"]
    build_fixtures(tmp_path / "www", args["TERRAFORM_VERSION"], version, "amd64")

    done = run_root_step(tmp_path, bundle_sha(tmp_path))

    assert done.returncode == 0, done.stderr
    assert f"Terraform v{args['TERRAFORM_VERSION']}" in done.stdout
    bundle = blueprint.bundle_name("Linux", "x86_64")
    hashicorp = f"https://releases.hashicorp.com/terraform/{args['TERRAFORM_VERSION']}"
    assert (tmp_path / "curl.log").read_text().splitlines() == [
        f"{hashicorp}/terraform_{args['TERRAFORM_VERSION']}_linux_amd64.zip",
        f"{hashicorp}/terraform_{args['TERRAFORM_VERSION']}_SHA256SUMS",
        blueprint.bundle_url(version, bundle),
    ]
    assert not (tmp_path / "bin" / "LICENSE.txt").exists()
    # ensure_bundle finds it without a download (an unreachable mirror would fail).
    found = cluster_toolkit.ensure_bundle(
        version, tmp_path / "cache", base_url="http://127.0.0.1:9", bundle=bundle
    )
    assert found == tmp_path / "cache" / version / bundle.removesuffix(".tgz")
    assert os.access(found / "gcluster", os.X_OK)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="fixtures are built for amd64")
def test_dockerfile_stops_on_a_terraform_checksum_mismatch(tmp_path):
    args = dockerfile_args()
    build_fixtures(tmp_path / "www", args["TERRAFORM_VERSION"], "v0", "amd64")
    zip_file = tmp_path / "www" / f"terraform_{args['TERRAFORM_VERSION']}_linux_amd64.zip"
    zip_file.write_bytes(zip_file.read_bytes() + b"tampered")

    done = run_root_step(tmp_path, bundle_sha(tmp_path))

    assert done.returncode != 0
    assert not (tmp_path / "bin" / "terraform").exists()
    assert not (tmp_path / "cache").exists()


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="fixtures are built for amd64")
def test_dockerfile_stops_on_a_bundle_checksum_mismatch_before_extracting(tmp_path):
    args = dockerfile_args()
    build_fixtures(tmp_path / "www", args["TERRAFORM_VERSION"], "v0", "amd64")
    pinned = bundle_sha(tmp_path)
    bundle = tmp_path / "www" / "gcluster_bundle_linux_amd64.tgz"
    bundle.write_bytes(bundle.read_bytes() + b"\0")  # what a swapped release asset would be

    done = run_root_step(tmp_path, pinned)

    assert done.returncode != 0
    assert "FAILED" in done.stdout + done.stderr  # sha256sum -c
    assert not (tmp_path / "cache").exists()


def test_dockerfile_requires_the_bundle_checksum(tmp_path):
    (tmp_path / "www").mkdir()
    done = run_root_step(tmp_path, "")

    assert done.returncode == 1
    assert "set the build arg GCLUSTER_BUNDLE_SHA256" in done.stderr
    assert not (tmp_path / "curl.log").exists()  # nothing downloaded


def test_dockerfile_maps_every_linux_machine_the_toolkit_publishes():
    script = root_run()
    for (system, machine), bundle in blueprint.BUNDLES.items():
        if system == "Linux" and machine != "arm64":  # uname -m says aarch64 on Linux
            arch = bundle.removeprefix("gcluster_bundle_linux_").removesuffix(".tgz")
            assert f"{machine}) arch={arch} ;;" in script


# ---------- docker compose ----------


def test_compose_services_executor_examples_and_health_checks():
    services = compose()["services"]
    # what `docker compose up` starts; the optional profile `lineage`: test_compose_lineage.py
    started = {name for name, service in services.items() if "profiles" not in service}
    assert started == AIRFLOW_SERVICES | {"postgres"}
    for name in AIRFLOW_SERVICES:
        service = services[name]
        env = service["environment"]
        assert service["build"] == {
            "context": ".",
            "args": {"GCLUSTER_BUNDLE_SHA256": "${GCLUSTER_BUNDLE_SHA256:-}"},
        }
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "false"
        assert "airflow-apiserver:8080/execution/" in env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"]
        if name != "airflow-init":
            assert service["healthcheck"]["test"]
            assert service["restart"] == "always"
            depends = service["depends_on"]
            assert depends["airflow-init"] == {"condition": "service_completed_successfully"}
            assert depends["postgres"] == {"condition": "service_healthy"}
    assert services["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert services["airflow-apiserver"]["ports"] == ["127.0.0.1:8080:8080"]
    commands = {name: services[name].get("command") for name in AIRFLOW_SERVICES}
    assert commands["airflow-triggerer"] == "triggerer"
    assert commands["airflow-dag-processor"] == "dag-processor"
    assert services["airflow-init"]["environment"]["_AIRFLOW_DB_MIGRATE"] == "true"


def test_compose_image_tag_matches_the_dockerfile():
    tag = base_image().split(":", 1)[1]
    for name in AIRFLOW_SERVICES:
        assert compose()["services"][name]["image"] == f"tpu-rl-airflow:{tag}"


def test_compose_mounts_project_folders_and_adc_read_only():
    for name in AIRFLOW_SERVICES:
        service = compose()["services"][name]
        mounts = service["volumes"]
        for folder in ("dags", "include"):
            assert f"./{folder}:/opt/airflow/{folder}" in mounts
        # tpu_rl comes from the image's wheel: a mounted plugins/tpu_rl would shadow it
        assert not [mount for mount in mounts if "plugins" in mount]
        assert f"${{HOME}}/.config/gcloud:{ADC_DIR}:ro" in mounts
        adc = service["environment"]["GOOGLE_APPLICATION_CREDENTIALS"]
        assert adc == f"{ADC_DIR}/application_default_credentials.json"
        google = json.loads(service["environment"]["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"])
        assert google == {"conn_type": "google_cloud_platform"}  # no key: ADC


def test_compose_hugging_face_connection_comes_from_env_file():
    example = (REPO / ".env.example").read_text()
    assert re.search(r"^HF_TOKEN=$", example, flags=re.M)  # the committed example holds no token
    for name in AIRFLOW_SERVICES:
        raw = compose()["services"][name]["environment"]["AIRFLOW_CONN_HUGGINGFACE_DEFAULT"]
        conn = json.loads(interpolate(raw, {"HF_TOKEN": "hf_fromdotenv"}))
        assert conn == {"conn_type": "generic", "password": "hf_fromdotenv"}
        # empty works: every compose command (build, down...) runs with the example's .env
        assert json.loads(interpolate(raw, {}))["password"] == ""
    assert ":?" not in (REPO / "docker-compose.yaml").read_text()
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=REPO)
    assert ignored.returncode == 0
    assert subprocess.run(["git", "check-ignore", "-q", ".env.example"], cwd=REPO).returncode == 1


def init_script() -> str:
    """airflow-init's bash script as the container runs it (compose's $$ unescaped)."""
    return interpolate(compose()["services"]["airflow-init"]["command"][1], {})


@pytest.mark.parametrize(("token", "warned"), [("", True), ("hf_fromdotenv", False)])
def test_compose_init_warns_when_the_hugging_face_token_is_empty(tmp_path, token, warned):
    raw = compose()["services"]["airflow-init"]["environment"]["AIRFLOW_CONN_HUGGINGFACE_DEFAULT"]
    script = init_script()
    check = script[script.index('if [[ "${AIRFLOW_CONN_HUGGINGFACE_DEFAULT}"') :]
    check = check[: check.index("fi\n") + 3]
    env = {
        "PATH": os.environ["PATH"],
        "AIRFLOW_CONN_HUGGINGFACE_DEFAULT": interpolate(raw, {"HF_TOKEN": token}),
    }
    done = subprocess.run(["bash", "-c", check], env=env, capture_output=True, text=True)
    assert done.returncode == 0
    assert ("WARNING: HF_TOKEN is empty in .env" in done.stdout) is warned


def test_compose_variables_are_all_in_env_example():
    text = (REPO / "docker-compose.yaml").read_text().replace("$$", "")
    used = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", text)) - {"HOME"}
    example = set(
        re.findall(r"^([A-Za-z_][A-Za-z0-9_]*)=", (REPO / ".env.example").read_text(), re.M)
    )
    assert used == example


def test_dockerignore_sends_only_the_lock_its_checker_and_the_wheels_sources():
    rules = [
        line
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert rules == [
        "*",
        "!requirements.lock",
        "!scripts/check_locked.py",
        "!pyproject.toml",
        "!plugins/tpu_rl",
        "**/__pycache__",
    ]
    sent = [
        args.split()[:-1]
        for stage in (0, -1)
        for word, args in dockerfile(stage)
        if word in ("COPY", "ADD") and "--from=" not in args
    ]
    assert [[a for a in copy if not a.startswith("--")] for copy in sent] == [
        ["pyproject.toml"],
        ["plugins/tpu_rl"],
        ["requirements.lock", "scripts/check_locked.py"],
    ]


# ---------- Composer: nothing to install ----------


def third_party_imports() -> set[str]:
    roots: set[str] = set()
    for path in [*REPO.glob("plugins/**/*.py"), *REPO.glob("dags/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots.add(node.module.split(".")[0])
    return {r for r in roots if r not in sys.stdlib_module_names} - {"__future__", "tpu_rl"}


def dependency_closure(names: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        for spec in metadata.requires(name) or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def test_runtime_imports_need_nothing_beyond_airflow_and_its_providers():
    """Why the wheel adds nothing beside itself to a Composer environment but tensorboard, the
    one dependency it declares beyond Airflow's (pip installs it with the wheel)."""
    shipped = dependency_closure(
        [
            "apache-airflow",
            "apache-airflow-providers-google",
            "apache-airflow-providers-cncf-kubernetes",
            "tensorboard",  # the watchdog's event file reader (tpu_rl.rewards.event_files)
            # the lineage extra, which Composer 3 ships (tpu_rl.operators.lineage)
            "apache-airflow-providers-openlineage",
        ]
    )
    providers = metadata.packages_distributions()
    imports = third_party_imports()
    assert {"airflow", "yaml", "kubernetes"} <= imports
    for module in imports:
        dists = {re.sub(r"[-_.]+", "-", d).lower() for d in providers[module]}
        assert dists & shipped, f"{module} ({dists}) is not shipped with Airflow and its providers"


# ---------- make airflow ----------


def test_make_airflow_runs_standalone_with_this_projects_folders(tmp_path):
    done = make(tmp_path, "-n", "airflow")

    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if "standalone" in line]
    assert line.endswith(" airflow standalone")
    assert line.startswith(f'PATH="{REPO}/.venv/bin:$PATH" ')
    for setting in (
        f"AIRFLOW_HOME={REPO}/.airflow",
        f"AIRFLOW__CORE__DAGS_FOLDER={REPO}/dags",
        f"AIRFLOW__CORE__PLUGINS_FOLDER={REPO}/plugins",
        "AIRFLOW__CORE__LOAD_EXAMPLES=False",
        "AIRFLOW__API__PORT=8080",
    ):
        assert f" {setting} " in line


# ---------- the delivery commands of docs/deployment.md ----------

COPIED = [
    "Makefile",
    "pyproject.toml",
    "requirements.txt",
    "requirements.lock",
    "docker-compose.yaml",
    "Dockerfile",
    ".env.example",
    "scripts",
    "tools",
    "dags",
    "plugins",
    "include",
]


def test_delivery_doc_commands_run_with_fakes(tmp_path):
    """Every shell block of docs/deployment.md's delivery section, in a copy of the project,
    with fake gcloud and docker; `make airflow` (a server) is run with -n, as the test above
    checks it."""
    blocks = re.findall(r"```bash\n(.*?)```", delivery_section(), flags=re.S)
    assert len(blocks) >= 3
    project = tmp_path / "project"
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, project / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            project.mkdir(exist_ok=True)
            shutil.copy2(source, project / name)
    (tmp_path / "home").mkdir()
    (tmp_path / "www").mkdir()
    sums = {
        arch: write_bundle(tmp_path / "www" / f"gcluster_bundle_linux_{arch}.tgz")
        for arch in ("amd64", "arm64")
    }
    env = fake_env(
        tmp_path,
        HOME=str(tmp_path / "home"),
        HF_TOKEN="hf_readmetoken",
        FAKE_CURL_ROOT=str(tmp_path / "www"),
    )
    ran_make_airflow = False
    for block in blocks:
        block_env = dict(env)
        if re.search(r"^make airflow$", block, flags=re.M):
            block_env["MAKEFLAGS"] = "n"
            ran_make_airflow = True
        if "make deploy-composer" in block:
            # the wheel `make dist` would build (its own test is tests/packaging)
            block_env["WHEEL"] = str(tmp_path / WHEEL_NAME)
            (tmp_path / WHEEL_NAME).touch()
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=project,
            env=block_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"{block}\n{done.stdout}\n{done.stderr}"
    assert ran_make_airflow
    # .env is the example scripts/pin_gcluster_bundle.sh copied, with the bundle's checksum
    # pinned and, on Linux, the user's id as AIRFLOW_UID
    arch = "arm64" if os.uname().machine in ("aarch64", "arm64") else "amd64"
    pinned = f"GCLUSTER_BUNDLE_SHA256={sums[arch]}\n"
    example = (REPO / ".env.example").read_text()
    if os.uname().sysname == "Linux":
        example = example.replace("AIRFLOW_UID=50000\n", f"AIRFLOW_UID={os.getuid()}\n")
    assert (project / ".env").read_text() == example.replace("GCLUSTER_BUNDLE_SHA256=\n", pinned)
    version = dockerfile_args()["CLUSTER_TOOLKIT_VERSION"]
    assert (tmp_path / "curl.log").read_text().splitlines() == [
        blueprint.bundle_url(version, f"gcluster_bundle_linux_{arch}.tgz")
    ]

    services = set(compose()["services"])
    docker = calls(tmp_path / "docker.jsonl")
    assert docker
    for call in docker:
        assert call["argv"][0] == "compose"
        assert call["cwd"] == str(project)
        assert set(a for a in call["argv"][2:] if not a.startswith("-")) <= services

    gcloud = calls(tmp_path / "gcloud.jsonl")
    secrets = [c for c in gcloud if c["argv"][:2] == ["secrets", "create"]]
    (secret,) = secrets
    assert secret["argv"][2] == "airflow-connections-huggingface_default"
    assert json.loads(secret["stdin"]) == {"conn_type": "generic", "password": "hf_readmetoken"}
    assert all("hf_readmetoken" not in " ".join(c["argv"]) for c in gcloud)  # never in argv
    backend = "airflow.providers.google.cloud.secrets.secret_manager.CloudSecretManagerBackend"
    assert any(f"--update-airflow-configs=secrets-backend={backend}" in c["argv"] for c in gcloud)
    where = ["--location", "us-central1", "--project", "my-project"]
    install = f"--update-pypi-package=tpu-rl-airflow=={VERSION}"
    assert ["composer", "environments", "update", "my-composer", *where, install] in [
        c["argv"] for c in gcloud
    ]
    (upload,) = calls(tmp_path / "twine.jsonl")
    assert upload["argv"][-1] == str(tmp_path / WHEEL_NAME)


def test_delivery_doc_lists_the_composer_roles_and_the_triggerer():
    text = delivery_section()
    for role in (
        "roles/tpu.admin",
        "roles/container.admin",
        "roles/compute.admin",
        "roles/storage.admin",
        "roles/iam.serviceAccountUser",
        "roles/iam.serviceAccountAdmin",
        "roles/resourcemanager.projectIamAdmin",
        "roles/serviceusage.serviceUsageAdmin",
    ):
        assert re.search(rf"^\| `{re.escape(role)}` \| \S.+\|$", text, flags=re.M), role
    assert "triggerer" in text
    assert "airflow-connections-huggingface_default" in text
    floor = pins((REPO / "requirements-compat.txt").read_text().split("# test tools")[0])
    for name, version in floor.items():  # the oldest providers supported (README: versions)
        if name.startswith("apache-airflow-providers-"):
            assert f"{name} {version}" in " ".join(text.split()), name
