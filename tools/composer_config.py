"""What `make deploy-composer` reads and writes besides commands: the environment's describe
output, the bucket's pip.conf, the names and places of what it uploads."""

from __future__ import annotations

import configparser
import io
import re
from dataclasses import dataclass
from typing import Any

PACKAGE = "tpu-rl-airflow"  # pyproject.toml's [project] name, as pip and Composer spell it
# Where the DAG files go under the bucket's dags/ (the older deploy's folder, so a redeploy
# overwrites them), where include/ goes (tpu_rl.include_files.COMPOSER_INCLUDE reads it there),
# and the plugins/ folder the older deploy filled with the package.
DAG_DESTINATION = "tpu_rl_airflow"
INCLUDE_DESTINATION = "data/tpu_rl_airflow/include"
OLD_PLUGIN_FOLDER = "plugins/tpu_rl"


# The names a deploy passes to gcloud, each with the rule of the service that owns it. The
# first three are Google's own API descriptions, in the discovery documents google-api-python-client
# ships (googleapiclient/discovery_cache/documents/): composer.v1.json Environment.name,
# compute.v1.json regions.get's `region` pattern (a Composer location is a region), and
# cloudresourcemanager.v3.json Project.projectId, with compute.v1.json's optional `domain:`
# prefix of older domain-scoped projects. The repository's: artifactregistry.v1.json gives
# repositories.create's `repositoryId` no pattern, so the rule is Google's general one for
# resource IDs, AIP-122 (https://google.aip.dev/122: lowercase letters, numbers and hyphens,
# starting with a letter, not ending with a hyphen, at most 63 characters), which Artifact
# Registry's "Create standard repositories" page (https://cloud.google.com/artifact-registry/
# docs/repositories/create-repos) follows for the name; a recommendation there, not a schema, so
# a name it refuses could in principle exist (none of the page's examples does). A name outside
# these rules is refused before any command runs.
NAME_RULES: dict[str, tuple[str, str]] = {
    "ENV": (
        r"[a-z](?:[-a-z0-9]{0,62}[a-z0-9])?",
        "a Composer environment ID must start with a lowercase letter followed by up to 63 "
        "lowercase letters, numbers, or hyphens, and cannot end with a hyphen",
    ),
    "LOCATION": (
        r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?",
        "a region name: lowercase letters, digits and hyphens, such as us-central1",
    ),
    "PROJECT": (
        r"(?:(?:[-a-z0-9]{1,63}\.)*[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?:)?[a-z][-a-z0-9]{4,28}[a-z0-9]",
        "a project ID must be 6 to 30 lowercase ASCII letters, digits, or hyphens, start with a "
        "letter and not end with a hyphen",
    ),
    "REPOSITORY": (
        r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?",
        "an Artifact Registry repository name has only lowercase letters, numbers and hyphens, "
        "starts with a letter and ends with a letter or number (at most 63)",
    ),
}


def name_errors(names: dict[str, str]) -> list[str]:
    """What is wrong with each of the given names (by make variable), per NAME_RULES."""
    return [
        f"{variable}={value!r}: {NAME_RULES[variable][1]}"
        for variable, value in names.items()
        if not re.fullmatch(NAME_RULES[variable][0], value)
    ]


def wheel_name(version: str) -> str:
    """The file `make dist` builds for this version."""
    return f"{PACKAGE.replace('-', '_')}-{version}-py3-none-any.whl"


@dataclass(frozen=True)
class Environment:
    """The fields of `gcloud composer environments describe --format=json` the deploy uses
    (Composer API's Environment resource: name, config.dagGcsPrefix,
    config.workloadsConfig.triggerer.count, config.nodeConfig.serviceAccount,
    config.softwareConfig.pypiPackages)."""

    project: str
    bucket: str
    triggerers: int
    service_account: str
    pypi_packages: dict[str, str]

    @classmethod
    def from_describe(cls, described: dict[str, Any]) -> Environment:
        # name: projects/{projectId}/locations/{locationId}/environments/{environmentId}
        match = re.fullmatch(
            r"projects/([^/]+)/locations/[^/]+/environments/[^/]+", described.get("name", "")
        )
        if not match:
            raise ValueError(f"unexpected environment name {described.get('name')!r}")
        config = described.get("config", {})
        prefix = config.get("dagGcsPrefix", "")
        if not re.fullmatch(r"gs://[^/]+/dags", prefix):
            raise ValueError(f"unexpected dagGcsPrefix {prefix!r}")
        triggerer = config.get("workloadsConfig", {}).get("triggerer", {})
        account = config.get("nodeConfig", {}).get("serviceAccount", "")
        if not account:
            raise ValueError("the environment names no service account (config.nodeConfig)")
        return cls(
            project=match.group(1),
            bucket=prefix.removesuffix("/dags"),
            triggerers=int(triggerer.get("count") or 0),
            service_account=account,
            pypi_packages=config.get("softwareConfig", {}).get("pypiPackages", {}),
        )

    def repository_url(self, location: str, repository: str) -> str:
        """The repository's upload URL; pip's index is its `simple/`
        (https://cloud.google.com/artifact-registry/docs/python/manage-packages)."""
        return f"https://{location}-python.pkg.dev/{self.project}/{repository}/"


def placeholder_environment(name: str, location: str, project: str) -> dict[str, Any]:
    """What a dry run, which describes nothing, assumes the environment looks like."""
    project = project or "PROJECT"
    return {
        "name": f"projects/{project}/locations/{location}/environments/{name}",
        "config": {
            "dagGcsPrefix": f"gs://BUCKET-OF-{name}/dags",
            "workloadsConfig": {"triggerer": {"count": 1}},
            "nodeConfig": {"serviceAccount": f"SERVICE-ACCOUNT-OF-{name}"},
            "softwareConfig": {"pypiPackages": {}},
        },
    }


def pip_conf_with_index(current: str | None, index: str) -> str:
    """pip.conf with `index` among [global] extra-index-url (pip reads several, separated by
    white space), the rest kept; `current` unchanged when it already lists it."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(current or "")
    if not parser.has_section("global"):
        parser.add_section("global")
    extra = parser.get("global", "extra-index-url", fallback="").split()
    if index in extra and current is not None:
        return current
    parser.set("global", "extra-index-url", "\n".join([*extra, index]))
    out = io.StringIO()
    parser.write(out)
    return out.getvalue()
