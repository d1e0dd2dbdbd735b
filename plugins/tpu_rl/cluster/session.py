"""A gcluster session: the bundle and terraform checked, the deployment's Google credentials in
the environment, and one call that runs commands on the cluster of given settings."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpu_rl.cluster import capacity
from tpu_rl.cluster import toolkit as cluster_toolkit
from tpu_rl.cluster.credentials import google_env

if TYPE_CHECKING:
    import subprocess

    from tpu_rl.cluster.blueprint import ClusterToolkitPlan
    from tpu_rl.settings.fields import RunSettings

Commands = Callable[["ClusterToolkitPlan"], list[list[str]]]
Gcluster = Callable[["RunSettings", Commands], None]


def toolkit_bundle(settings: RunSettings) -> Path:
    """The pinned Cluster Toolkit bundle (downloaded once), with terraform on PATH."""
    bundle = cluster_toolkit.ensure_bundle(
        settings.cluster_toolkit_version, cluster_toolkit.cache_dir()
    )
    cluster_toolkit.require_terraform()
    return bundle


@contextlib.contextmanager
def toolkit_session(
    bundle: Path,
    project: str,
    identity: str,
    conn_id: str,
    state_prefix: str,
    timeout: float,
    log: Any,
    started: Callable[[subprocess.Popen[str]], None] | None = None,
) -> Iterator[Gcluster]:
    """`gcluster(settings, commands)`: the commands for the cluster of `settings` (labelled
    with `identity`), in a fresh deployment folder, each within `timeout` seconds; a failed
    Spot deploy for lack of VMs says so (tpu_rl.cluster.capacity.deploy_stockout)."""
    with google_env(conn_id, project) as (env, secrets):

        def gcluster(on: RunSettings, commands: Commands) -> None:
            with tempfile.TemporaryDirectory(prefix=f"gcluster-{on.cluster_name}-") as tmp:
                steps = cluster_toolkit.prepare_workdir(
                    Path(tmp), bundle, on, identity, state_prefix
                )
                for argv in commands(steps):
                    try:
                        cluster_toolkit.run_gcluster(
                            argv,
                            Path(tmp),
                            log,
                            timeout=timeout,
                            env=env,
                            secrets=secrets,
                            started=started,
                        )
                    except cluster_toolkit.ClusterToolkitError as err:
                        if why := capacity.deploy_stockout(on, str(err)):
                            raise cluster_toolkit.ClusterToolkitError(f"{why}\n{err}") from err
                        raise

        yield gcluster
