"""Rules a run's settings must meet before any cloud call; each returns the problems it finds."""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from tpu_rl.settings.capacity_rules import CAPACITY_RULES, ladder, reservation, short_run_warnings
from tpu_rl.settings.cell_rules import CELL_RULES, catalogue_warnings, tpu_shape
from tpu_rl.settings.choices import ClusterMode
from tpu_rl.settings.eval_rules import (
    best_checkpoint_warnings,
    champion_gains,
    gate_metric_names,
    heldout_benchmarks,
)
from tpu_rl.settings.fields import CHOICE_FIELDS, REQUIRED_SETTINGS, SETTING_FIELDS, RunSettings
from tpu_rl.settings.grpo_rules import GRPO_RULES
from tpu_rl.settings.images import IMAGE_SETTINGS, is_unpinned
from tpu_rl.settings.metadata import default_of
from tpu_rl.settings.references import hf_repo_id_problem, image_reference_problem
from tpu_rl.settings.text_rules import CLUSTER_NAME, MAX_LIST_ITEMS, TextRule, short_repr

Rule = Callable[[RunSettings], Iterator[str]]
RULES: list[Rule] = []

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# MaxText flags the builders set from settings or per run; extra_train_args may not repeat them.
MANAGED_TRAIN_FLAGS = {
    "run_name",
    "base_output_directory",
    "model_name",
    "load_parameters_path",
    "hf_access_token",
    "vllm_additional_config",
    "chips_per_vm",  # from the TPU generation (tpu_rl.jobs.maxtext_flags.shape_flags)
}
BOUNDED_FIELDS = tuple(f for f in SETTING_FIELDS.values() if f.metadata["bounds"])
FLOORED_FIELDS = tuple(f for f in SETTING_FIELDS.values() if f.metadata["at_least"] is not None)
TEXT_FIELDS = tuple(f for f in SETTING_FIELDS.values() if f.metadata["text"])


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def validate(s: RunSettings, rules: Sequence[Rule] | None = None) -> list[str]:
    """Every problem the rules find (`rules`, RULES by default), in one pass, in rule order.

    Integers out of their bounds, text over its length limit and control characters are
    reported first, and the other rules run on the settings with those values at their
    defaults: the rules compute with them (10**400 chips would overflow a float) or quote them
    (a 10 MiB value, an ANSI escape). A rule's problem that names a replaced setting is left
    out, since it would be about the default, not the user's value.
    """
    outside = [*out_of_bounds(s), *text_problems(s, TextRule.unsafe)]
    held = {setting_of(problem) for problem in outside}
    checked = replace(s, **{name: default_of(SETTING_FIELDS[name]) for name in held})
    about_held = re.compile(rf"\b({'|'.join(map(re.escape, sorted(held)))})\b") if held else None
    problems = [
        problem
        for check in (RULES if rules is None else rules)
        for problem in check(checked)
        if not (about_held and about_held.search(problem))
    ]
    named = {setting_of(problem) for problem in outside + problems}
    # a character outside a setting's class, unless a rule of its own already said what is wrong
    off_class = text_problems(s, TextRule.off_class)
    return outside + problems + [p for p in off_class if setting_of(p) not in named]


def settings_warnings(s: RunSettings) -> list[str]:
    """What valid settings still should tell a user before the run: validate's log and `make
    plan` print them."""
    return [*catalogue_warnings(s), *short_run_warnings(s), *best_checkpoint_warnings(s)]


def setting_of(problem: str) -> str:
    """The setting a problem names first: `name` of `name: ...` or `name[2]: ...`."""
    return problem.partition(":")[0].partition("[")[0]


@rule
def required_names(s: RunSettings) -> Iterator[str]:
    for name in REQUIRED_SETTINGS:
        if not getattr(s, name).strip():
            yield f"{name}: required, and empty"


# name -> (pattern, what a value that does not match it breaks)
NAME_PATTERNS = {
    "project": (
        r"[a-z][a-z0-9-]{4,28}[a-z0-9]",
        "is not a project ID (6-30 characters: lower-case letters, "
        "digits, hyphens; starts with a letter, does not end with a hyphen)",
    ),
    "cluster_name": (
        rf"[a-z][a-z0-9-]{{0,{CLUSTER_NAME.max_length - 1}}}",
        "must start with a lower-case letter, hold only lower-case letters, digits and "
        f"hyphens, and be at most {CLUSTER_NAME.max_length} characters",
    ),
}


@rule
def names(s: RunSettings) -> Iterator[str]:
    for name, (pattern, rule_text) in NAME_PATTERNS.items():
        value = getattr(s, name)
        if value and not re.fullmatch(pattern, value):
            yield f"{name}: {value!r} {rule_text}"
        elif name == "cluster_name" and value.endswith("-"):
            yield f"cluster_name: {value!r} must not end with a hyphen (GKE rule)"


@rule
def bucket_name(s: RunSettings) -> Iterator[str]:
    b = s.gcs_bucket
    if not b:
        return
    if b.startswith("gs://"):
        yield f"gcs_bucket: give the bucket name only, not a URL ({b!r})"
        return
    problems = []
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*[a-z0-9]", b):
        problems.append(
            "only lower-case letters, digits, '-', '_' and '.', starting and ending with a "
            "letter or digit"
        )
    if len(b) < 3 or len(b) > (222 if "." in b else 63):
        problems.append("3-63 characters (222 with dots, each part at most 63)")
    if any(len(part) > 63 for part in b.split(".")):
        problems.append("each dot-separated part at most 63 characters")
    if ".." in b or ".-" in b or "-." in b:
        problems.append("no '..', '.-' or '-.'")
    if b.startswith("goog") or "google" in b or "g00gle" in b:
        problems.append("must not start with 'goog' or contain 'google'")
    if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", b):
        problems.append("must not be an IP address")
    for p in problems:
        yield f"gcs_bucket: {b!r}: {p}"


@rule
def region_and_zone(s: RunSettings) -> Iterator[str]:
    if s.region and not re.fullmatch(r"[a-z]+-[a-z]+\d+", s.region):
        yield f"region: {s.region!r} is not a region name like 'us-east5'"
    if s.zone and not re.fullmatch(r"[a-z]+-[a-z]+\d+-[a-z]", s.zone):
        yield f"zone: {s.zone!r} is not a zone name like 'us-east5-b'"
    elif s.zone and s.region and s.zone.rsplit("-", 1)[0] != s.region:
        yield f"zone: {s.zone!r} is not in region {s.region!r}"


@rule
def out_of_bounds(s: RunSettings) -> Iterator[str]:
    """Every integer setting within the bounds its field declares, and every number with a floor
    a finite one at or above it (a negative watchdog factor fires at every step; a nan one, which
    every comparison answers False, turns its rule off without a word)."""
    for f in BOUNDED_FIELDS:
        low, high = f.metadata["bounds"]
        value = getattr(s, f.name)
        shown = (
            value if abs(value) < 10**30 else f"a {int(value.bit_length() * 0.30103)}-digit number"
        )
        if value < low:
            yield f"{f.name}: must be {'0 or more' if low == 0 else f'at least {low}'}, got {shown}"
        elif value > high:
            yield f"{f.name}: must be at most {high}, got {shown}"
    for f in FLOORED_FIELDS:
        value, floor = getattr(s, f.name), f.metadata["at_least"]
        if not (math.isfinite(value) and value >= floor):
            yield f"{f.name}: must be {floor:g} or more and finite, got {value}"


def text_problems(s: RunSettings, check: Callable[[TextRule, str], str | None]) -> Iterator[str]:
    """What `check` finds in each free-text setting (each item of a list) by its text rule."""
    for f in TEXT_FIELDS:
        value = getattr(s, f.name)
        items = value if isinstance(value, list) else [value]
        if len(items) > MAX_LIST_ITEMS:
            yield f"{f.name}: {len(items)} items; at most {MAX_LIST_ITEMS}"
            continue
        for i, item in enumerate(items):
            if problem := check(f.metadata["text"], item):
                yield f"{f.name}{f'[{i}]' if isinstance(value, list) else ''}: {problem}"


# The TPU cell, GRPO, capacity, gate, champion and held-out rules live in modules of their own;
# they run here, in this order.
RULES.extend(
    (
        *CELL_RULES,
        *GRPO_RULES,
        *CAPACITY_RULES,
        gate_metric_names,
        champion_gains,
        heldout_benchmarks,
    )
)


@rule
def ranges(s: RunSettings) -> Iterator[str]:
    if not 0 < s.learning_rate < 1:
        yield f"learning_rate: must be in (0, 1), got {s.learning_rate}"
    if not 0 < s.decode_sampling_temperature <= 2:
        yield f"decode_sampling_temperature: must be in (0, 2], got {s.decode_sampling_temperature}"
    if not 0 < s.decode_sampling_nucleus_p <= 1:
        yield f"decode_sampling_nucleus_p: must be in (0, 1], got {s.decode_sampling_nucleus_p}"
    if not 0 < s.hbm_utilization_vllm < 1:
        yield f"hbm_utilization_vllm: must be in (0, 1), got {s.hbm_utilization_vllm}"
    if not math.isfinite(s.min_reward_gain):
        yield f"min_reward_gain: must be a finite number, got {s.min_reward_gain}"


@rule
def cluster_mode_dependencies(s: RunSettings) -> Iterator[str]:
    """Settings that only mean something with the other cluster mode."""
    if s.cluster_mode == ClusterMode.EXISTING and s.keep_cluster:
        yield (
            "keep_cluster: only applies with cluster_mode=create (a run never destroys an "
            "existing cluster); leave it off"
        )


@rule
def choices(s: RunSettings) -> Iterator[str]:
    """Every setting with a closed set of values holds one of them."""
    for f in CHOICE_FIELDS:
        options = [member.value for member in f.metadata["choices"]]
        if getattr(s, f.name) not in options:
            listed = ", ".join(map(repr, options[:-1])) + f" or {options[-1]!r}"
            yield f"{f.name}: must be {listed}, got {short_repr(getattr(s, f.name))}"


@rule
def authorized_cidr(s: RunSettings) -> Iterator[str]:
    try:
        ipaddress.ip_network(s.authorized_cidr, strict=True)
    except ValueError as err:
        yield f"authorized_cidr: {s.authorized_cidr!r} is not a CIDR block ({err})"


@rule
def kubernetes_names(s: RunSettings) -> Iterator[str]:
    if not (DNS_LABEL.fullmatch(s.namespace) and len(s.namespace) <= 63):
        yield f"namespace: {s.namespace!r} is not a Kubernetes namespace name (DNS-1123 label)"
    if s.kueue_queue and not (DNS_LABEL.fullmatch(s.kueue_queue) and len(s.kueue_queue) <= 63):
        yield f"kueue_queue: {s.kueue_queue!r} is not a LocalQueue name (DNS-1123 label)"
    account = s.client_service_account
    if account and not (
        len(account) <= 253 and all(DNS_LABEL.fullmatch(part) for part in account.split("."))
    ):
        yield (
            f"client_service_account: {account!r} is not a Kubernetes service account name "
            "(DNS-1123 subdomain)"
        )


@rule
def model_references(s: RunSettings) -> Iterator[str]:
    for name in ("hf_model_path", "tokenizer_path"):
        if problem := hf_repo_id_problem(getattr(s, name)):
            yield f"{name}: {getattr(s, name)!r} {problem}"
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", s.model_name):
        yield f"model_name: {s.model_name!r} is not a MaxText model name like 'gemma4-26b'"
    for name in IMAGE_SETTINGS:
        if problem := image_reference_problem(getattr(s, name)):
            yield f"{name}: {getattr(s, name)!r} {problem}"


@rule
def pinned_images(s: RunSettings) -> Iterator[str]:
    """Every image pinned by a version tag or a digest, unless the user accepts `latest`."""
    if s.allow_unpinned_images:
        return
    for name in IMAGE_SETTINGS:
        if is_unpinned(getattr(s, name)):
            yield (
                f"{name}: {getattr(s, name)!r} is not pinned: `latest` moves with each push, "
                "so a scheduled run drifts to whatever was pushed last; give a version tag or "
                "a digest, or set allow_unpinned_images=true to accept it"
            )


@rule
def toolkit_version(s: RunSettings) -> Iterator[str]:
    if not re.fullmatch(r"v\d+\.\d+\.\d+", s.cluster_toolkit_version):
        yield (
            f"cluster_toolkit_version: {s.cluster_toolkit_version!r} must be a release tag "
            "like 'v1.103.0'"
        )


@rule
def vllm_overrides_json(s: RunSettings) -> Iterator[str]:
    try:
        parsed = json.loads(s.vllm_hf_overrides)
    except json.JSONDecodeError as err:
        yield f"vllm_hf_overrides: not valid JSON ({err})"
        return
    if not isinstance(parsed, dict):
        yield "vllm_hf_overrides: must be a JSON object"


@rule
def extra_train_args(s: RunSettings) -> Iterator[str]:
    seen: set[str] = set()
    for arg in s.extra_train_args:
        key, sep, _ = arg.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][\w.]*", key):
            yield f"extra_train_args: {arg!r} must be key=value with a MaxText flag name"
            continue
        as_setting = key.replace(".", "_")
        if key in MANAGED_TRAIN_FLAGS:
            yield f"extra_train_args: {key} is set by the run itself and cannot be overridden"
        elif as_setting in SETTING_FIELDS:
            yield f"extra_train_args: {key} has its own setting; set {as_setting} instead"
        elif key in seen:
            yield f"extra_train_args: {key} given twice"
        seen.add(key)


# What a Cluster Toolkit step reads of a cluster's settings (tpu_rl.cluster: the bundle's
# version, the blueprint's edits for the TPU shape and capacity, the deployment file, the state
# prefix and labels). A step given a cluster's own settings, the janitor's destroy of a leftover
# cluster (tpu_rl.janitor.rules.destroy_settings), is checked by these alone: settings rebuilt
# from a cluster's node pools hold no run, so the run's rules (slice roles, meshes: the
# defaults') would refuse every shape but the tutorial's, and the cluster would keep billing.
CLUSTER_RULES: tuple[Rule, ...] = (
    required_names,
    names,
    bucket_name,
    region_and_zone,
    tpu_shape,
    ladder,
    reservation,
    choices,
    authorized_cidr,
    kubernetes_names,
    toolkit_version,
)
