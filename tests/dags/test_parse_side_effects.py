"""Parsing a DAG file changes nothing of Airflow's: no class state set as a side effect of an
import (each parse is a fresh fork of the DAG processor, so such a write buys nothing lasting
and hides what the parse really costs; `make bench` measures that cost as Airflow pays it)."""

from __future__ import annotations

import pytest

from tests.dags.parse_probe import DAG_FILES, probe_parse

BASE_OPERATOR_CHANGED_BY_PARSE = """
import json, runpy, sys
from airflow.sdk import BaseOperator
before = dict(vars(BaseOperator))
runpy.run_path(sys.argv[1])
after = vars(BaseOperator)
print(json.dumps(sorted(k for k in {*before, *after} if before.get(k) is not after.get(k))))
"""


@pytest.mark.parametrize("dag_file", DAG_FILES)
def test_parsing_a_dag_file_leaves_airflows_base_operator_as_it_was(dag_file):
    assert probe_parse(BASE_OPERATOR_CHANGED_BY_PARSE, dag_file) == []
