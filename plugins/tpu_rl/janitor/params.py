"""The janitor's Params and their strict reading: a value of the wrong type is refused with a
message, never coerced (a coerced `"dry_run": null` would turn deletion on)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow.sdk import Param

from tpu_rl import deployment
from tpu_rl.settings.params import SCHEMA_DIALECT, default_settings


class JanitorParamsError(ValueError):
    """The janitor's Params (with its Variable) hold a value of the wrong type."""


def _dry_run(value: Any) -> bool:
    """Only an explicit JSON false turns deletion on; an unset value (null) keeps dry-run."""
    if value is None or isinstance(value, bool):
        return value is not False
    raise ValueError("must be true or false (a JSON boolean); deletion stays off")


def _text(value: Any) -> str:
    """A string, stripped; null reads as empty."""
    if value is None or isinstance(value, str):
        return (value or "").strip()
    raise TypeError("must be a string")


def _names(value: Any) -> tuple[str, ...]:
    """A list of names; null reads as none."""
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value):
        return tuple(v.strip() for v in value)
    raise TypeError("must be a list of names")


def _minutes(value: Any) -> int:
    """A whole number of minutes, 0 or more."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError("must be a whole number of minutes, 0 or more")


PARSERS: dict[str, Callable[[Any], Any]] = {
    "project": _text,
    "region": _text,
    "clusters": _names,
    "existing_clusters": _names,
    "namespace": _text,
    "grace_minutes": _minutes,
    "dry_run": _dry_run,
    "gcs_bucket": _text,
    "cluster_toolkit_version": _text,
}


@dataclass(frozen=True)
class JanitorParams:
    """The janitor's Params, typed."""

    project: str
    region: str
    clusters: tuple[str, ...]
    existing_clusters: tuple[str, ...]
    namespace: str
    grace_minutes: int
    dry_run: bool
    gcs_bucket: str
    cluster_toolkit_version: str

    @classmethod
    def from_params(
        cls, given: Mapping[str, Any], stored: Mapping[str, Any] | None = None
    ) -> JanitorParams:
        """The Params; where one is left at its built-in default, the stored default (the
        Variable tpu_rl_janitor_params, read at run time, never at parse time) applies."""
        built_in = {name: param.value for name, param in janitor_params().items()}
        stored = stored or {}
        params = {
            name: stored.get(name, default) if given.get(name, default) == default else given[name]
            for name, default in built_in.items()
        }
        problems, values = [], {}
        for name, parse in PARSERS.items():
            try:
                values[name] = parse(params[name])
            except (TypeError, ValueError) as err:
                problems.append(f"{name}: {err} (got {params[name]!r})")
        if problems:
            raise JanitorParamsError(
                "janitor settings refused, nothing was inspected or removed: " + "; ".join(problems)
            )
        return cls(**values)

    @property
    def gcp_conn_id(self) -> str:
        return deployment.gcp_conn_id()

    @property
    def grace(self) -> timedelta:
        return timedelta(minutes=self.grace_minutes)


def janitor_params() -> dict[str, Param]:
    """The DAG's Params with their built-in defaults (the Variable is merged in at run time).

    Fields that may stay empty accept null, which the trigger form sends for an emptied field.
    """

    def param(
        name: str, default: Any, title: str, section: str, description: str, **schema: Any
    ) -> Param:
        keywords: dict[str, Any] = {
            **SCHEMA_DIALECT,
            "title": title,
            "description": description,
            "section": section,
            **schema,
        }
        return Param(default, **keywords)

    names = {"type": ["null", "array"], "items": {"type": "string"}}
    where, how, destroy = "What to sweep", "How", "Destroying clusters"
    return {
        "project": param(
            "project", "", "Project", where, "Google Cloud project to sweep.", type="string"
        ),
        "region": param(
            "region", "", "Region", where, "Region whose clusters are swept.", type="string"
        ),
        "clusters": param(
            "clusters",
            [],
            "Clusters",
            where,
            "Clusters to inspect, one per line; empty: every cluster in the region labelled by "
            "this package.",
            **names,
        ),
        "existing_clusters": param(
            "existing_clusters",
            [],
            "Existing clusters",
            where,
            "Clusters used with cluster_mode=existing (or kept), one per line: their leftover "
            "Kubernetes objects are removed, the clusters are never destroyed.",
            **names,
        ),
        "namespace": param(
            "namespace",
            default_settings().namespace,
            "Namespace",
            where,
            "Kubernetes namespace of the runs' objects.",
            type="string",
        ),
        "dry_run": param(
            "dry_run",
            True,
            "Dry run",
            how,
            "Only report what would be removed; change nothing.",
            type="boolean",
        ),
        "grace_minutes": param(
            "grace_minutes",
            120,
            "Grace period (min)",
            how,
            "Only what is older than this is removed.",
            type="integer",
            minimum=0,
        ),
        "gcs_bucket": param(
            "gcs_bucket",
            "",
            "GCS bucket",
            destroy,
            "Bucket of the clusters' terraform state (the runs' gcs_bucket); needed to destroy "
            "a cluster, not for a dry run.",
            type=["null", "string"],
        ),
        "cluster_toolkit_version": param(
            "cluster_toolkit_version",
            default_settings().cluster_toolkit_version,
            "Cluster Toolkit version",
            destroy,
            "gcluster release that destroys clusters.",
            type="string",
        ),
    }
