"""The README shows the commands CI and a newcomer run, in reading order, and links the
reference in docs/, whose quoted messages and links are current."""

from __future__ import annotations

import re

from tests.conftest import REPO

DOCS = REPO / "docs"
REFERENCE = (
    "deployment.md",
    "operations.md",
    "capacity.md",
    "benchmarks.md",
    "settings.md",
    "ui.md",
    "promotion.md",
)
# Generated from the settings by `python -m tpu_rl.settings.table docs/settings.md`; its own
# test checks that it exists and is current.
GENERATED = {DOCS / "settings.md"}


def readme() -> str:
    return (REPO / "README.md").read_text()


def documents() -> list:
    return [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def test_readme_links_every_reference_page_and_the_settings_reference():
    text = readme()
    for page in REFERENCE:
        assert f"](docs/{page}" in text, page
    settings = " ".join(text[text.index("## Settings") : text.index("## Commands")].split())
    assert "[docs/settings.md](docs/settings.md)" in settings
    assert "before any cloud call" in settings
    assert "settings-table:start" not in text  # the table lives in docs/settings.md


def test_readme_composer_section_names_the_oldest_supported_providers():
    text = readme()
    section = " ".join(
        text[text.index("## Cloud Composer") : text.index("## Supported versions")].split()
    )
    requirements = (REPO / "requirements-compat.txt").read_text().split("# test tools")[0]
    providers = re.findall(r"^(apache-airflow-providers-[a-z-]+)==(\S+)$", requirements, re.M)
    assert len(providers) >= 3
    for name, version in providers:
        assert f"{name} {version}" in section, name
    assert "triggerer" in section and "cluster_mode=existing" in section


def test_readme_starts_with_demo_and_test_and_ci_runs_make_test():
    text = readme()
    assert text.index("make demo") < text.index("make test") < text.index("make plan")
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_troubleshooting_quotes_only_messages_the_code_prints():
    text = (DOCS / "operations.md").read_text()
    section = text[text.index("## Troubleshooting") : text.index("## The janitor")]
    quoted = [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")]
    sources = "\n".join(p.read_text() for p in (REPO / "plugins").rglob("*.py"))
    assert len(quoted) >= 12
    for message in quoted:
        # `[reason]` is the sensor's prefix: f"[{reason}] ..." with the reason a literal
        literal = f'"{message[1:-1]}"' if message.startswith("[") else message
        assert literal in sources, message


def test_readme_reading_order():
    """What it is, the two commands, the UI, real use, Composer, configuration, then where
    things are; the reference sections are in docs/."""
    text = readme()
    headings = [
        "## First two commands",
        "## See it in Airflow's UI: `make demo-ui`",
        "## Real use, step by step",
        "## Cloud Composer",
        "## Deployment configuration",
        "## The Hugging Face token",
        "## Settings",
        "## Commands",
        "## Where things are",
    ]
    positions = [text.index(heading) for heading in headings]
    assert positions == sorted(positions)
    assert text.index("validate -> preflight -> ensure_bucket") < positions[0]  # the DAG
    for mention in ("make help", "make clean", "RL post-training", "run-report.md", "tutorial"):
        assert mention in text[: positions[2]], mention
    reference = {
        "deployment.md": [
            "## Local Airflow with docker compose",
            "## Without Docker: `make airflow`",
            "## Cloud Composer",
        ],
        "operations.md": [
            "## Preflight: the checks before any spend",
            "## What a run creates, and what removes it",
            "## Time limits",
            "## The run report and TPU-hours",
            "## Troubleshooting",
            "## The janitor",
        ],
        "capacity.md": ["# TPU capacity: reservation, flex-start or Spot"],
        "promotion.md": [
            "## Evaluations and the gate",
            "## Champion against challenger",
            "## Approval",
            "## The champion record and the registry",
        ],
        "benchmarks.md": ["# Benchmarks (`make bench`)"],
    }
    for page, page_headings in reference.items():
        page_text = (DOCS / page).read_text()
        page_positions = [page_text.index(heading) for heading in page_headings]
        assert page_positions == sorted(page_positions), page


def section(text: str, heading: str) -> str:
    """The README section under `heading`, up to the next `## `, on one line."""
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return " ".join(text[start : end if end != -1 else None].split())


def test_readme_keeps_what_the_issues_ask_of_the_readme_itself():
    """What stays in the README, not only in docs/: how a deployment's identity is set and
    what it isolates, the capacity ladder with an example, the supported versions table, the
    promotion path in one section."""
    text = readme()
    deployment = section(text, "## Deployment configuration")
    for fact in ("TPU_RL_DEPLOYMENT_ID", "tpu_rl_deployment_id", "Job, JobSet and Secret"):
        assert fact in deployment, fact
    assert "checkpoint and export folders" in deployment
    ladder = section(text, "## Capacity ladder")
    assert '"capacity_ladder": "reservation@' in ladder
    versions = section(text, "## Supported versions")
    assert "| Airflow | google provider | cncf-kubernetes provider |" in versions
    promotion = section(text, "## Promotion")
    for step in ("evaluate_champion", "compare_champion", "approve", "promote"):
        assert f"`{step}`" in promotion, step


def test_every_make_target_the_readme_and_docs_name_exists():
    named = {
        target
        for path in documents()
        for target in re.findall(r"(?:^|`)make ([a-z][a-z0-9-]*)", path.read_text(), flags=re.M)
    }
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, flags=re.M))
    assert named <= targets, named - targets


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


def test_links_between_readme_and_docs_resolve():
    """Every relative link of README.md and docs/*.md names a file, and its #anchor a heading."""
    for path in documents():
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto
            file_part, _, fragment = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if linked in GENERATED:
                continue
            assert linked.is_file(), f"{path.name}: {target}"
            if fragment:
                headings = re.findall(r"^#+ (.+)$", linked.read_text(), flags=re.M)
                assert fragment in {anchor(h) for h in headings}, f"{path.name}: {target}"
