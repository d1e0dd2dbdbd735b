"""The swept kinds are declared once (tpu_rl.kube.swept): the table's order and API paths, the
docs generated from it or agreeing with it, and the modules that walk it importing nothing above
kube."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO
from tpu_rl.kube.swept import SWEPT_KINDS, kinds_text, swept_kind

PACKAGE = REPO / "plugins" / "tpu_rl"
# Kinds a prose list may name beside the swept ones; one of them in a list of swept kinds means
# the list says the cleanup deletes something the table does not.
OTHER_KINDS = ("Pod", "Node", "Namespace", "ConfigMap", "ServiceAccount", "Deployment", "Service")
# A sentence about what the cleanup removes (a resume's "Job and JobSet" are not its kinds).
CLEANUP = re.compile(r"clean|sweep|janitor|leftover|timed out|callback", re.IGNORECASE)


def test_jobsets_go_first_and_each_kind_has_its_api_path():
    assert [k.plural for k in SWEPT_KINDS] == ["jobsets", "jobs", "secrets"]
    assert len({k.plural for k in SWEPT_KINDS}) == len(SWEPT_KINDS)
    paths = [k.object_path("default", "x") for k in SWEPT_KINDS]
    assert paths == [
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/x",
        "/apis/batch/v1/namespaces/default/jobs/x",
        "/api/v1/namespaces/default/secrets/x",
    ]
    # a Job's pods are orphaned by the API server's default for batch/v1
    assert swept_kind("jobs").propagation == "Foreground"
    assert kinds_text() == "JobSets, Jobs and Secrets"


def kind_lists(text: str) -> list[tuple[int, str, set[str]]]:
    """Each list of Kubernetes kinds in a sentence about the cleanup ("the janitor removes
    Jobs, JobSets and Secrets"): its line, its words, and the kinds it names."""
    names = sorted([k.kind for k in SWEPT_KINDS] + list(OTHER_KINDS), key=len, reverse=True)
    word = rf"(?:{'|'.join(names)})s?\b"
    joint = r"(?:,\s+(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+)(?:[a-z]+\s+)?"  # "and token Secrets"
    found = []
    for match in re.finditer(rf"\b{word}(?:{joint}{word})+", text):
        if not CLEANUP.search(sentence_around(text, match.start(), match.end())):
            continue
        named = {re.sub(r"s$", "", w) for w in re.findall(word, match[0])}
        found.append((text.count("\n", 0, match.start()) + 1, " ".join(match[0].split()), named))
    return found


def sentence_around(text: str, start: int, end: int) -> str:
    """The sentence (or paragraph, or table row) holding text[start:end]."""
    ends = re.compile(r"\.\s|\n\s*\n|\n\||\"\"\"")
    before = [m.end() for m in ends.finditer(text, 0, start)]
    after = ends.search(text, end)
    return text[before[-1] if before else 0 : after.start() if after else len(text)]


def product_texts() -> list[Path]:
    return [
        REPO / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "dags").glob("*.py")),
        *sorted(PACKAGE.rglob("*.py")),
    ]


def test_the_kind_lists_of_the_docs_and_docstrings_name_the_swept_kinds():
    """Wherever the product's text lists two of the swept kinds, it lists them all and nothing
    else: the other places say "Kubernetes objects" and point at the table."""
    swept = {k.kind for k in SWEPT_KINDS}
    wrong = [
        f"{path.relative_to(REPO)}:{line}: {words}"
        for path in product_texts()
        for line, words, named in kind_lists(path.read_text())
        if len(named & swept) >= 2 and named != swept
    ]
    assert wrong == [], "lists of kinds that are not the swept kinds:\n" + "\n".join(wrong)


def test_a_kind_list_that_misses_or_adds_a_kind_is_found():
    text = (
        "cleanup deletes Jobs, JobSets and Secrets.\nThe janitor: JobSets and Jobs first,\n"
        "then Secrets. A resume deletes the Job and JobSet.\n\nLeftover Job, JobSet, Pods"
    )
    assert [(line, named) for line, _, named in kind_lists(text)] == [
        (1, {"Job", "JobSet", "Secret"}),
        (2, {"JobSet", "Job"}),
        (5, {"Job", "JobSet", "Pod"}),
    ]


def tpu_rl_imports(path: Path) -> set[str]:
    """The tpu_rl modules a file imports anywhere (also inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("tpu_rl")}


def test_the_sweep_imports_nothing_above_kube():
    for name in ("swept.py", "swept_doc.py", "cluster_client.py"):
        above = {
            m for m in tpu_rl_imports(PACKAGE / "kube" / name) if not m.startswith("tpu_rl.kube")
        }
        assert above == set(), name


def test_the_timeout_callback_does_not_import_the_operators():
    """dag is below operators: the callback sweeps through tpu_rl.kube.swept, not through
    cleanup_kubernetes's operator."""
    imports = tpu_rl_imports(PACKAGE / "dag" / "callbacks.py")
    assert not {m for m in imports if m.startswith("tpu_rl.operators")}
    assert "tpu_rl.kube.swept" in imports
