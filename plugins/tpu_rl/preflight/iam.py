"""IAM: what the caller may do in the project (Resource Manager projects.testIamPermissions) and
which roles the node pools' service accounts hold there (projects.getIamPolicy), read through
google.cloud.resourcemanager_v3's typed ProjectsClient (tpu_rl.preflight.google_api).

https://cloud.google.com/resource-manager/reference/rest/v3/projects/testIamPermissions,
https://cloud.google.com/resource-manager/reference/rest/v3/projects/getIamPolicy; the bucket's
own policy (storage.v1 discovery document, buckets.getIamPolicy: GET b/{bucket}/iam, a Policy
of `bindings[]` {role, members}), read through the provider's GCSHook, for grants made on the
bucket rather than the project.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tpu_rl.preflight.google_api import GoogleApi, read
from tpu_rl.preflight.result import CheckResult, failed, passed, skipped
from tpu_rl.settings.choices import ClusterMode
from tpu_rl.settings.fields import RunSettings

RESOURCE_MANAGER = "cloudresourcemanager.googleapis.com"
# One permission of each tutorial role a step needs (the seed's list: roles/container.admin,
# compute.admin, storage.admin, iam.serviceAccountUser, iam.serviceAccountAdmin,
# resourcemanager.projectIamAdmin): what the run's own calls and gcluster's Terraform do.
EVERY_RUN = (
    "container.clusters.get",
    "storage.buckets.get",
    "storage.objects.create",
    "storage.objects.get",
    "storage.objects.list",
)
CREATING_A_CLUSTER = (
    "container.clusters.create",
    "container.clusters.delete",
    "compute.networks.create",
    "compute.subnetworks.create",
    "storage.buckets.create",
    "iam.serviceAccounts.create",
    "iam.serviceAccounts.actAs",
    "resourcemanager.projects.setIamPolicy",
)
# What a pod writing checkpoints as its node pool's account needs (the tutorial's blueprint
# edit: `- storage.objectViewer` -> `- storage.admin` on the node pool service account).
# Any predefined role holding storage.objects.create and .get does: objectUser ("create, view,
# update and delete objects") as well as objectAdmin and admin; basic Owner and Editor hold
# them too (https://cloud.google.com/storage/docs/access-control/iam-roles).
STORAGE_WRITERS = (
    "roles/storage.admin",
    "roles/storage.objectAdmin",
    "roles/storage.objectUser",
    "roles/owner",
    "roles/editor",
)
# A node pool whose service account is "default" runs as the Compute Engine default service
# account (container.v1 discovery document, NodeConfig.serviceAccount: "If not specified, the
# \"default\" service account is used"; https://cloud.google.com/compute/docs/access/
# service-accounts#default_service_account: PROJECT_NUMBER-compute@developer.gserviceaccount.com).
DEFAULT_ACCOUNT = "default"
CALLER, POOLS = "caller permissions", "node pool roles"


def needed_permissions(s: RunSettings) -> tuple[str, ...]:
    if s.cluster_mode == ClusterMode.CREATE:
        return EVERY_RUN + CREATING_A_CLUSTER
    return EVERY_RUN


def check_caller(api: GoogleApi, s: RunSettings) -> list[CheckResult]:
    """The permissions the run's calls need, granted to the deployment's credentials."""
    from google.iam.v1 import iam_policy_pb2

    wanted = needed_permissions(s)
    request = iam_policy_pb2.TestIamPermissionsRequest(
        resource=f"projects/{s.project}", permissions=list(wanted)
    )
    granted = set(read(_projects(api).test_iam_permissions, request).permissions)
    missing = [p for p in wanted if p not in granted]
    if missing:
        return [
            failed(
                CALLER,
                f"the deployment's credentials lack {', '.join(missing)} on {s.project}",
                "grant the tutorial's roles to the GCP connection's account (roles/container.admin,"
                " roles/compute.admin, roles/storage.admin, roles/iam.serviceAccountUser, "
                "roles/iam.serviceAccountAdmin, roles/resourcemanager.projectIamAdmin): gcloud "
                f"projects add-iam-policy-binding {s.project} --member=<account> --role=<role>",
            )
        ]
    return [passed(CALLER, f"{len(wanted)} permissions granted on {s.project}")]


def _projects(api: GoogleApi) -> Any:
    """Resource Manager v3's typed Projects client."""
    from google.cloud import resourcemanager_v3

    return api.client(resourcemanager_v3.ProjectsClient, RESOURCE_MANAGER)


def _project_writers(api: GoogleApi, s: RunSettings) -> set[str]:
    from google.iam.v1 import iam_policy_pb2, options_pb2

    request = iam_policy_pb2.GetIamPolicyRequest(
        resource=f"projects/{s.project}",
        options=options_pb2.GetPolicyOptions(requested_policy_version=3),
    )
    policy = read(_projects(api).get_iam_policy, request)
    return _writers((binding.role, binding.members) for binding in policy.bindings)


def _writers(bindings: Iterable[tuple[str, Iterable[str]]]) -> set[str]:
    """The members of the (role, members) bindings granting a storage write role."""
    return {member for role, members in bindings if role in STORAGE_WRITERS for member in members}


def _bucket_writers(s: RunSettings, gcp_conn_id: str) -> set[str]:
    """The members a storage write role is granted to on the run's bucket (none before it
    exists: ensure_bucket makes it)."""
    from airflow.providers.google.cloud.hooks.gcs import GCSHook
    from google.api_core.exceptions import NotFound

    bucket = GCSHook(gcp_conn_id=gcp_conn_id).get_conn().bucket(s.gcs_bucket)
    try:
        policy = bucket.get_iam_policy(requested_policy_version=3)
    except NotFound:
        return set()
    return _writers((binding["role"], binding["members"]) for binding in policy.bindings)


def _email(api: GoogleApi, s: RunSettings, account: str) -> str:
    """A pool's account as an email: "default" is the project's Compute Engine default
    account (its number from Resource Manager projects.get: `name` projects/NUMBER)."""
    if account != DEFAULT_ACCOUNT:
        return account
    from google.cloud import resourcemanager_v3

    request = resourcemanager_v3.GetProjectRequest(name=f"projects/{s.project}")
    number = read(_projects(api).get_project, request).name.split("/")[-1]
    return f"{number}-compute@developer.gserviceaccount.com"


def check_pool_roles(
    api: GoogleApi, s: RunSettings, accounts: dict[str, str], gcp_conn_id: str
) -> CheckResult:
    """Every workload pool's account ({pool: email or "default"}) may write the bucket's
    objects, by a role on the project or on the bucket; none found is what `node pools` fails."""
    if not accounts:
        return skipped(POOLS, "no node pool the run lands on was found (see node pools)")
    emails = {pool: _email(api, s, sa or DEFAULT_ACCOUNT) for pool, sa in accounts.items()}
    writers = _project_writers(api, s)
    if any(f"serviceAccount:{sa}" not in writers for sa in emails.values()):
        writers |= _bucket_writers(s, gcp_conn_id)
    lacking = {pool: sa for pool, sa in emails.items() if f"serviceAccount:{sa}" not in writers}
    if lacking:
        listed = ", ".join(f"{pool} ({sa})" for pool, sa in sorted(lacking.items()))
        return failed(
            POOLS,
            f"no storage write role on {s.project} or gs://{s.gcs_bucket} for {listed}: their "
            "host-network pods cannot write checkpoints",
            f"gcloud storage buckets add-iam-policy-binding gs://{s.gcs_bucket} "
            "--member=serviceAccount:<account> --role=roles/storage.objectUser, or the "
            f"tutorial's edit: gcloud projects add-iam-policy-binding {s.project} "
            "--member=serviceAccount:<account> --role=roles/storage.admin",
        )
    return passed(POOLS, f"{', '.join(sorted(accounts))} run as accounts with a storage write role")
