"""Grammars of the names the run hands to others: image references and Hugging Face repo ids.

Checked before any cloud call: a bad image reference leaves pods in InvalidImageName until
their deadline, a bad repo id fails the conversion after the cluster is up.
"""

from __future__ import annotations

import re

# The OCI / distribution reference grammar (distribution/reference's regexp.go), ASCII only:
# [host[:port]/]path-component(/path-component)*[:tag][@digest], path components lower case.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", re.ASCII)
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(
    rf"(?P<name>(?:(?P<domain>{_DOMAIN})/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{IMAGE_TAG.pattern}))?(?:@(?P<digest>{_DIGEST}))?",
    re.ASCII,
)
# Hugging Face repo ids (huggingface_hub's validate_repo_id): namespace/name, ASCII letters,
# digits, '.', '_', '-', neither part starting or ending with '.' or '-', no '--' or '..',
# at most 96 characters.
_HF_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?"
HF_REPO_ID = re.compile(rf"{_HF_PART}/{_HF_PART}", re.ASCII)


def image_reference_problem(reference: str) -> str | None:
    """Why `reference` is not a pullable image reference with a tag or digest, if it is not."""
    match = IMAGE_REFERENCE.fullmatch(reference)
    if not match:
        return (
            "is not an image reference ([registry[:port]/]repository[:tag][@digest]; the "
            "repository in lower-case ASCII letters, digits and '.', '_', '-' separators)"
        )
    if not (match.group("tag") or match.group("digest")):
        return "needs a tag or a digest (a full image reference pins what runs)"
    if len(match.group("name")) > 255:
        return "has a repository name over 255 characters"
    digest = match.group("digest")
    if digest and digest.startswith("sha256:") and not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        return "has a sha256 digest that is not 64 lower-case hex digits"
    return None


def hf_repo_id_problem(repo_id: str) -> str | None:
    """Why `repo_id` is not a Hugging Face repo id like 'org/name', if it is not."""
    if not HF_REPO_ID.fullmatch(repo_id):
        return (
            "must be a Hugging Face repo id like 'org/name' (ASCII letters, digits, '.', '_', "
            "'-'; neither part starting or ending with '.' or '-')"
        )
    if "--" in repo_id or ".." in repo_id:
        return "must not contain '--' or '..' (Hugging Face rule)"
    if len(repo_id) > 96:
        return f"is {len(repo_id)} characters; Hugging Face allows at most 96"
    if repo_id.endswith(".git"):
        return "must not end with '.git'"
    return None
