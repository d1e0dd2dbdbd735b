"""tpu_rl.settings.references: image references and Hugging Face repo ids."""

from __future__ import annotations

import pytest

from tests.support.settings import errors_for
from tpu_rl.settings.references import hf_repo_id_problem, image_reference_problem


@pytest.mark.parametrize(
    "reference",
    [
        "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4",
        "localhost:5000/team/maxtext:dev",
        "maxtext:1",
        "gcr.io/p/maxtext@sha256:" + "0a" * 32,
        "gcr.io/p/maxtext:v1@sha256:" + "0a" * 32,
        "registry.example.com:443/a__b/c-d.e:Tag_1.0",
    ],
)
def test_image_references_the_oci_grammar_accepts(tutorial_conf, reference):
    assert errors_for(tutorial_conf, cloud_image_name=reference) == []


@pytest.mark.parametrize(
    ("reference", "problem"),
    [
        ("Ubuntu:22.04", "is not an image reference"),
        ("ubuntu", "needs a tag or a digest"),
        ("r.io/" + "a" * 251 + ":1", "has a repository name over 255 characters"),
        ("ubuntu@sha256:" + "A" * 64, "has a sha256 digest that is not 64 lower-case hex"),
    ],
)
def test_a_reference_that_cannot_pin_what_runs_says_why(reference, problem):
    assert image_reference_problem(reference).startswith(problem)
    assert image_reference_problem("ubuntu@sha256:" + "a" * 64) is None


@pytest.mark.parametrize(
    ("repo_id", "problem"),
    [
        ("google/gemma-3-1b-it", None),
        ("gemma", "must be a Hugging Face repo id like 'org/name'"),
        ("-org/name", "must be a Hugging Face repo id like 'org/name'"),
        ("org/na--me", "must not contain '--' or '..'"),
        ("org/" + "n" * 93, "is 97 characters; Hugging Face allows at most 96"),
        ("org/name.git", "must not end with '.git'"),
    ],
)
def test_a_repo_id_follows_hugging_faces_rules(repo_id, problem):
    found = hf_repo_id_problem(repo_id)
    assert found == problem if problem is None else found.startswith(problem)
