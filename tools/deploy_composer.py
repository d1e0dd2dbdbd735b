"""`make deploy-composer`: install this project on Cloud Composer 3 as a Python package.

Composer 3 syncs the bucket's plugins/ to neither the scheduler nor the triggerer ("Cloud
Composer 3 doesn't support custom plugins for the Airflow scheduler and the Airflow triggerer",
https://cloud.google.com/composer/docs/composer-3/install-plugins, "Before you begin"), and every
deferred wait of a run is a tpu_rl trigger the triggerer imports by classpath. So tpu_rl goes in
as the wheel `tpu-rl-airflow`, installed on every Airflow component as a custom PyPI package
from an Artifact Registry Python repository (https://cloud.google.com/composer/docs/composer-3/
install-python-dependencies, "Install from an Artifact Registry repository"). The UI plugin comes
with it: Airflow loads the `airflow.plugins` entry points of installed packages in every process
(airflow/plugins_manager.py, _get_plugins -> _load_entrypoint_plugins). plugins/ gets nothing.

Each command is printed before it runs (DRY_RUN: printed only, checks shown as on a first
deploy); the steps and their order: ComposerDeploy.run, and docs/deployment.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

from tools.composer_config import (
    DAG_DESTINATION,
    INCLUDE_DESTINATION,
    OLD_PLUGIN_FOLDER,
    PACKAGE,
    Environment,
    name_errors,
    pip_conf_with_index,
    placeholder_environment,
    wheel_name,
)
from tools.deploy_shell import ROOT, DeployError, Shell

DEFAULT_REPOSITORY = "tpu-rl-airflow"
READER_ROLE = "roles/artifactregistry.reader"
# Twine authenticates with an OAuth access token as the password of the user
# `oauth2accesstoken`: Artifact Registry's token method for automation
# (https://cloud.google.com/artifact-registry/docs/python/authentication, "Access tokens");
# twine reads both from its environment, so the token appears in no argument or output.
TOKEN_USER = "oauth2accesstoken"


def project_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


class ComposerDeploy:
    """One deploy of this project to one Composer environment."""

    def __init__(self, args: argparse.Namespace, shell: Shell):
        self.args, self.shell = args, shell
        self.version = project_version()
        self.where = ["--location", args.location] + (
            ["--project", args.project] if args.project else []
        )

    def run(self) -> None:
        if not self.shell.dry_run and shutil.which("twine") is None:
            # Artifact Registry's documented uploader (manage-packages page above)
            raise DeployError("twine is not on PATH: `pip install twine` first")
        wheel = self.wheel()
        env = self.environment()
        index = env.repository_url(self.args.location, self.args.repository)
        self.ensure_repository(env)
        self.upload(env, wheel, index)
        self.point_pip_at(env, f"{index}simple/")
        self.install(env)
        self.remove_old_plugin_copy(env)
        self.import_dags()
        self.shell.run(
            [
                *["gcloud", "storage", "rsync", "include", f"{env.bucket}/{INCLUDE_DESTINATION}"],
                *["--recursive", "--delete-unmatched-destination-objects"],
                "--exclude=.*__pycache__.*",
            ]
        )

    def wheel(self) -> Path:
        """The wheel of pyproject.toml's version: WHEEL if given (built elsewhere), else built."""
        expected = wheel_name(self.version)
        if self.args.wheel:
            wheel = Path(self.args.wheel)
            if wheel.name != expected:
                raise DeployError(
                    f"{wheel.name} is not {expected}: pyproject.toml says version {self.version}"
                )
        else:
            wheel = ROOT / "dist" / expected
            self.shell.run(["make", "--no-print-directory", "dist"])
        if not self.shell.dry_run and not wheel.is_file():
            raise DeployError(f"{wheel} does not exist")
        return wheel

    def environment(self) -> Environment:
        describe = ["gcloud", "composer", "environments", "describe", self.args.environment]
        placeholder = placeholder_environment(
            self.args.environment, self.args.location, self.args.project
        )
        text = self.shell.read([*describe, *self.where, "--format=json"], json.dumps(placeholder))
        try:
            env = Environment.from_describe(json.loads(text))
        except ValueError as error:
            raise DeployError(f"environment {self.args.environment}: {error}") from None
        if env.triggerers < 1:
            name = self.args.environment
            raise DeployError(
                f"environment {name} has no triggerer: the reward sensor and the Job waits "
                "defer, so no run would finish (and its TPUs would keep billing). Add one "
                f"with: gcloud composer environments update {name} "
                f"{' '.join(self.where)} --triggerer-count 1"
            )
        return env

    def ensure_repository(self, env: Environment) -> None:
        repo = ["gcloud", "artifacts", "repositories"]
        where = ["--location", self.args.location, "--project", env.project]
        if self.shell.exists([*repo, "describe", self.args.repository, *where]) is None:
            self.shell.run(
                [
                    *[*repo, "create", self.args.repository, "--repository-format=python"],
                    *[*where, "--description=tpu-rl-airflow wheels for Cloud Composer"],
                ]
            )
        # The environment's pip reads the repository as this account (Composer page above:
        # "grant ... the Artifact Registry Reader role"); granting it again changes nothing.
        self.shell.run(
            [
                *[*repo, "add-iam-policy-binding", self.args.repository, *where],
                *[f"--member=serviceAccount:{env.service_account}", f"--role={READER_ROLE}"],
            ]
        )

    def upload(self, env: Environment, wheel: Path, index: str) -> None:
        """Uploads the wheel, unless its version is already there: a version's files cannot
        change once uploaded, so a changed package needs a new version in pyproject.toml."""
        version = [
            *["gcloud", "artifacts", "versions", "describe", self.version],
            f"--package={PACKAGE}",
            f"--repository={self.args.repository}",
            *["--location", self.args.location, "--project", env.project],
        ]
        if self.shell.exists(version) is not None:
            print(
                f"{PACKAGE} {self.version} is already in {index}: not uploaded again (the "
                "environment installs that upload; to ship changed code, raise the version "
                "in pyproject.toml)."
            )
            return
        token = self.shell.read(["gcloud", "auth", "print-access-token"], "ACCESS-TOKEN")
        self.shell.run(
            ["twine", "upload", "--non-interactive", "--repository-url", index, str(wheel)],
            env={"TWINE_USERNAME": TOKEN_USER, "TWINE_PASSWORD": token.strip()},
            note=f"TWINE_USERNAME={TOKEN_USER}, TWINE_PASSWORD=the access token",
        )

    def point_pip_at(self, env: Environment, simple_index: str) -> None:
        """Adds the repository to the bucket's config/pip/pip.conf (Composer page above), keeping
        whatever else that file says."""
        url = f"{env.bucket}/config/pip/pip.conf"
        current = self.shell.exists(["gcloud", "storage", "cat", url])
        wanted = pip_conf_with_index(current, simple_index)
        if wanted == current:
            print(f"pip.conf already names {simple_index}")
            return
        with tempfile.TemporaryDirectory() as folder:
            local = Path(folder) / "pip.conf"
            local.write_text(wanted)
            print(f"pip.conf for {self.args.environment}:\n" + wanted.rstrip())
            self.shell.run(["gcloud", "storage", "cp", str(local), url])

    def install(self, env: Environment) -> None:
        wanted = f"=={self.version}"
        if env.pypi_packages.get(PACKAGE) == wanted:
            # Composer refuses an update that changes nothing
            print(f"{PACKAGE}{wanted} is already installed: no environment update.")
            return
        self.shell.run(
            [
                *["gcloud", "composer", "environments", "update", self.args.environment],
                *[*self.where, f"--update-pypi-package={PACKAGE}{wanted}"],
            ],
            note="waits until every Airflow component runs the new image",
        )

    def remove_old_plugin_copy(self, env: Environment) -> None:
        """The package now comes from the wheel: a plugins/tpu_rl copy from the old deploy
        would shadow it on the API server and workers (and register the UI plugin twice)."""
        folder = f"{env.bucket}/{OLD_PLUGIN_FOLDER}/"
        found = self.shell.exists(["gcloud", "storage", "ls", folder]) is not None
        if not (found or self.shell.dry_run):
            return
        self.shell.run(["gcloud", "storage", "rm", "--recursive", folder], note="if ls found it")
        if found:
            print(f"Removed {folder}, the copy an older deploy-composer left (now in the wheel).")

    def import_dags(self) -> None:
        """After the install, so the new DAG files never parse against the old package."""
        for dag_file in sorted((ROOT / "dags").glob("*.py")):
            self.shell.run(
                [
                    *["gcloud", "composer", "environments", "storage", "dags", "import"],
                    *["--environment", self.args.environment, *self.where],
                    *["--source", f"dags/{dag_file.name}", "--destination", DAG_DESTINATION],
                ]
            )


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The deploy's arguments; an empty --project or --repository (as make passes an unset
    PROJECT or REPOSITORY) means the default."""
    parser = argparse.ArgumentParser(prog="make deploy-composer", description=__doc__)
    parser.add_argument("environment")
    parser.add_argument("location")
    parser.add_argument("--project", default="")
    parser.add_argument("--repository", default="")
    parser.add_argument("--wheel", default="", help="a wheel built elsewhere (e.g. by CI)")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    args.repository = args.repository or DEFAULT_REPOSITORY
    return args


def refused_names(args: argparse.Namespace) -> list[str]:
    """What is wrong with the names the deploy would pass to gcloud (named by make variable)."""
    names = {"ENV": args.environment, "LOCATION": args.location, "REPOSITORY": args.repository}
    return name_errors(names | ({"PROJECT": args.project} if args.project else {}))


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    refused = refused_names(args)
    if refused:
        print("error: " + "\n       ".join(refused), file=sys.stderr)
        return 1
    shell = Shell(args.dry_run)
    try:
        ComposerDeploy(args, shell).run()
    except DeployError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.dry_run:
        print(
            "DRY_RUN=1: nothing was run; checks were not run, so every step shows as on a "
            "first deploy."
        )
    else:
        print(f"Deployed to {args.environment}: tpu_rl_post_training appears after the next parse.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
