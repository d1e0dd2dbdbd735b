"""Runs Cluster Toolkit on a worker: the cached release bundle, terraform, gcluster's output.

Destroy from an empty disk: the destroy task rebuilds the deployment folder with
`gcluster create` from the same settings and pinned bundle (state lives in GCS), so no
uploaded copy of the folder can go stale or be missing after a half-way deploy.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tpu_rl.cluster import blueprint, kueue_config
from tpu_rl.settings.fields import RunSettings

CONFIG_SECTION = "tpu_rl"  # [tpu_rl] in airflow.cfg, or AIRFLOW__TPU_RL__<KEY> env vars
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "tpu-rl-airflow" / "gcluster"
DOWNLOAD_TIMEOUT_SECONDS = 300
TAIL_LINES = 30
GUARD = Path(__file__).with_name("gcluster_guard.py")
TERRAFORM_HELP = (
    "terraform is not on PATH; Cluster Toolkit runs it for deploy and destroy. Install "
    "Terraform (https://developer.hashicorp.com/terraform/install) on the Airflow workers "
    "(for Composer: in the worker image or a PATH entry) and retry."
)


class ClusterToolkitError(RuntimeError):
    """gcluster could not be fetched or run, or it failed."""


def _config(key: str, fallback: str) -> str:
    from airflow.providers.common.compat.sdk import conf

    return conf.get(CONFIG_SECTION, key, fallback=fallback) or fallback


def release_base_url() -> str:
    """Bundle download base: [tpu_rl] gcluster_release_base_url, for a mirror; else GitHub."""
    return _config("gcluster_release_base_url", blueprint.RELEASE_BASE_URL)


def cache_dir() -> Path:
    """Bundle cache: [tpu_rl] gcluster_cache_dir, else ~/.cache/tpu-rl-airflow/gcluster."""
    return Path(_config("gcluster_cache_dir", str(DEFAULT_CACHE_DIR)))


def ensure_bundle(
    version: str, cache: Path, base_url: str | None = None, bundle: str | None = None
) -> Path:
    """The extracted bundle folder for this version and platform, downloaded at most once."""
    bundle = bundle or blueprint.bundle_name()
    target = cache / version / bundle.removesuffix(".tgz")
    if (target / "gcluster").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one download per worker machine
        if (target / "gcluster").is_file():
            return target
        url = blueprint.bundle_url(version, bundle, base_url or release_base_url())
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".download-") as tmp:
            archive = Path(tmp) / bundle
            _download(url, archive)
            extracted = Path(tmp) / "bundle"
            _extract(archive, extracted, url)
            shutil.rmtree(target, ignore_errors=True)  # a folder left without gcluster
            extracted.rename(target)
    return target


def _download(url: str, dest: Path) -> None:
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as resp:
            expected = resp.headers.get("Content-Length")
            with open(dest, "wb") as out:
                shutil.copyfileobj(resp, out)
    except OSError as err:
        raise ClusterToolkitError(f"cannot download Cluster Toolkit bundle {url}: {err}") from err
    if expected is not None and dest.stat().st_size != int(expected):
        raise ClusterToolkitError(
            f"incomplete download of {url}: {dest.stat().st_size} of {expected} bytes"
        )


def _extract(archive: Path, dest: Path, url: str) -> None:
    """Extract with tarfile's `data` filter: no absolute paths, links out, or device files."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, OSError) as err:
        raise ClusterToolkitError(f"bad Cluster Toolkit bundle {url}: {err}") from err
    if not (dest / "gcluster").is_file():
        raise ClusterToolkitError(f"Cluster Toolkit bundle {url} has no gcluster at its top")


def require_terraform(path: str | None = None) -> str:
    """terraform's path on PATH (or on `path`), else a clear error naming what to install."""
    found = shutil.which("terraform", path=path)
    if not found:
        raise ClusterToolkitError(TERRAFORM_HELP)
    return found


def prepare_workdir(
    workdir: Path, bundle_dir: Path, settings: RunSettings, deployment: str, state_prefix: str
) -> blueprint.ClusterToolkitPlan:
    """Write the edited blueprint (beside the files it stages) and the deployment file; the
    cluster is labelled with the deployment identity `deployment`."""
    source = bundle_dir / blueprint.BUNDLE_BLUEPRINT
    if not source.is_file():
        raise ClusterToolkitError(f"the bundle has no {blueprint.BUNDLE_BLUEPRINT}")
    for sibling in source.parent.iterdir():  # e.g. kueue-configuration.yaml.tftpl (ghpc_stage)
        if sibling.is_file() and sibling != source:
            shutil.copy2(sibling, workdir / sibling.name)
    steps = blueprint.plan(
        source.read_text(),
        settings,
        deployment,
        state_prefix,
        gcluster=str(bundle_dir / "gcluster"),
    )
    for name, text in steps.files.items():
        (workdir / name).write_text(text)
    staged_kueue = workdir / kueue_config.CONFIG_FILE
    if staged_kueue.is_file():  # the blueprint's own; cover what the Pathways backend asks for
        staged_kueue.write_text(kueue_config.edit_kueue_config(staged_kueue.read_text()))
    return steps


def mask(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret, and every long line of a multi-line secret, as ***."""
    for secret in secrets:
        for part in (secret, *secret.splitlines()):
            part = part.strip()
            if len(part) >= 6:
                text = text.replace(part, "***")
    return text


def run_gcluster(
    argv: list[str],
    cwd: Path,
    log: Any,
    timeout: float,
    env: Mapping[str, str] | None = None,
    secrets: Iterable[str] = (),
    started: Callable[[subprocess.Popen[str]], None] | None = None,
) -> None:
    """Run argv in cwd, streaming its output line by line (masked) into `log`."""
    secrets = [s for s in secrets if s]
    log.info("Running: %s (in %s)", mask(" ".join(argv), secrets), cwd)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    proc = subprocess.Popen(
        [sys.executable, str(GUARD), *argv],  # the group dies with this process
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        bufsize=1,
        start_new_session=True,  # its own process group: a timeout stops terraform too
    )
    if started:
        started(proc)
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        stop(proc)

    timer = threading.Timer(timeout, expire)
    timer.start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = mask(raw.rstrip("\n"), secrets)
            tail.append(line)
            log.info("%s", line)
        code = proc.wait()
    finally:
        timer.cancel()
    command = f"{Path(argv[0]).name} {Path(argv[1]).name}"  # e.g. "gcluster deploy"
    if timed_out.is_set():
        raise ClusterToolkitError(
            f"{command} timed out after {timeout:.0f}s; last lines:\n" + "\n".join(tail)
        )
    if code != 0:
        raise ClusterToolkitError(
            f"{command} failed (exit {code}); last lines:\n" + "\n".join(tail)
        )


def stop(proc: subprocess.Popen[str], grace_seconds: float = 60) -> None:
    """Interrupt gcluster's process group (terraform releases its state lock), then kill it."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(grace_seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
