"""The files of the repository's include/ folder a run renders from (the blueprint, the Kueue
configuration), found in a clone or in Cloud Composer's data folder."""

from __future__ import annotations

from pathlib import Path

from tpu_rl.cluster import blueprint, kueue_config

# The tutorial's blueprint as the toolkit ships it; a run edits the one in its pinned bundle.
PLAN_BLUEPRINT = Path("cluster-toolkit") / blueprint.BLUEPRINT_FILE
PLAN_KUEUE_CONFIG = Path("cluster-toolkit") / kueue_config.CONFIG_FILE
# Where include/ is (the wheel does not carry it: only `make plan` reads it): the current
# folder's, as `make plan` runs from the repository; beside plugins/ when tpu_rl is imported from
# a clone's plugins/; on Cloud Composer, make deploy-composer puts it under the bucket's data/
# folder, mounted here.
COMPOSER_INCLUDE = Path("/home/airflow/gcs/data/tpu_rl_airflow/include")


def include_dirs() -> list[Path]:
    """Candidate include/ folders, in the order they are tried."""
    clone = Path(__file__).resolve().parents[2] / "include"  # plugins/tpu_rl/plan.py's repo
    return list(dict.fromkeys([Path.cwd() / "include", clone, COMPOSER_INCLUDE]))


def include_file(relative: Path) -> Path:
    """A file of include/, from the repository or from Composer's data folder."""
    tried = [folder / relative for folder in include_dirs()]
    for path in tried:
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"include/{relative} not found; looked in {', '.join(map(str, tried))} "
        "(deploy with make deploy-composer, or run from a full clone)"
    )
