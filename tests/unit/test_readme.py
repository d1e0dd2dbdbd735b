"""The README shows the commands CI and a newcomer run (the settings table is docs/settings.md,
checked in test_params)."""

from __future__ import annotations

import re

from tests.conftest import REPO


def test_readme_starts_with_demo_and_test_and_ci_runs_make_test():
    text = (REPO / "README.md").read_text()
    assert text.index("make demo") < text.index("make test") < text.index("make plan")
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_troubleshooting_quotes_only_messages_the_code_prints():
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Troubleshooting") : text.index("## The janitor")]
    quoted = [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")]
    sources = "\n".join(p.read_text() for p in (REPO / "plugins").rglob("*.py"))
    assert len(quoted) >= 12
    for message in quoted:
        # `[reason]` is the sensor's prefix: f"[{reason}] ..." with the reason a literal
        literal = f'"{message[1:-1]}"' if message.startswith("[") else message
        assert literal in sources, message


def test_readme_reading_order():
    """What it is, the two commands, the UI, real use, delivery, then the reference sections."""
    text = (REPO / "README.md").read_text()
    headings = [
        "## First two commands",
        "## See it in Airflow's UI: `make demo-ui`",
        "## Real use, step by step",
        "## Local Airflow with docker compose",
        "## Cloud Composer",
        "## Settings",
        "## Troubleshooting",
        "## The janitor",
        "## Benchmarks",
    ]
    positions = [text.index(heading) for heading in headings]
    assert positions == sorted(positions)
    assert text.index("validate -> ensure_bucket") < positions[0]  # the picture of the DAG
    for mention in ("make help", "make clean", "RL post-training", "run-report.md", "tutorial"):
        assert mention in text[: positions[2]], mention


def test_every_make_target_the_readme_names_exists():
    text = (REPO / "README.md").read_text()
    named = set(re.findall(r"(?:^|`)make ([a-z][a-z0-9-]*)", text, flags=re.M))
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, flags=re.M))
    assert named <= targets, named - targets
