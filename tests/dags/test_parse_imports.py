"""The parse budget as one rule: parsing a DAG file loads only the tpu_rl modules listed here.

Every module a DAG file pulls in is imported in each DAG processor's parse; the rest of the
package (Kubernetes clients, triggers, report rendering) must wait until a task runs.
"""

from __future__ import annotations

import pytest

from tests.dags.parse_probe import DAG_FILES, probe_parse

# What parsing the two DAG files loads today: their own imports and what those pull.
# Update here when a module moves; add to it only what a parse really needs.
ALLOWED_AT_PARSE = frozenset(
    {
        "tpu_rl",
        "tpu_rl.dag",
        "tpu_rl.dag.callbacks",
        "tpu_rl.dag.docs",
        "tpu_rl.dag.limits",
        "tpu_rl.dag.links",
        "tpu_rl.dag.params",
        "tpu_rl.deployment",
        "tpu_rl.janitor",
        "tpu_rl.janitor.params",
        "tpu_rl.names",
        "tpu_rl.operators",
        "tpu_rl.operators.backend",
        "tpu_rl.operators.champion",
        "tpu_rl.operators.checks",
        "tpu_rl.operators.cluster",
        "tpu_rl.operators.cluster_objects",
        "tpu_rl.operators.heldout",
        "tpu_rl.operators.janitor",
        "tpu_rl.operators.job_steps",
        "tpu_rl.operators.preflight",
        "tpu_rl.operators.promotion",
        "tpu_rl.operators.jobs",
        "tpu_rl.operators.lineage",  # the steps' OpenLineage part (a base; OpenLineage imported
        # only in the methods the provider's listener calls)
        "tpu_rl.operators.rewards",
        "tpu_rl.operators.run_step",
        "tpu_rl.operators.rung_move",  # leaving a ladder's rung (a base of steps)
        "tpu_rl.operators.training_resume",  # the reward wait's resumes (a base of steps)
        "tpu_rl.promotion",
        "tpu_rl.promotion.approval_notice",  # the approval's notifier, an argument at parse
        "tpu_rl.report",
        "tpu_rl.report.notify",
        "tpu_rl.rewards",
        "tpu_rl.rewards.sensor",
        "tpu_rl.settings",
        "tpu_rl.settings.params",
    }
)
LIST_LOADED_AFTER_PARSE = """
import json, runpy, sys
runpy.run_path(sys.argv[1])
print(json.dumps(sorted(m for m in sys.modules if m == "tpu_rl" or m.startswith("tpu_rl."))))
"""


def tpu_rl_modules_loaded_by(dag_file: str) -> list[str]:
    """The tpu_rl modules in sys.modules after a fresh interpreter runs the DAG file."""
    return probe_parse(LIST_LOADED_AFTER_PARSE, dag_file)


@pytest.mark.parametrize("dag_file", DAG_FILES)
def test_parsing_a_dag_file_loads_only_the_allowed_tpu_rl_modules(dag_file):
    loaded = tpu_rl_modules_loaded_by(dag_file)
    assert "tpu_rl" in loaded  # the probe saw the package at all
    assert sorted(set(loaded) - ALLOWED_AT_PARSE) == []
