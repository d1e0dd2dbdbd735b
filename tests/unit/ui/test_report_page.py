"""tpu_rl.ui.report_page: the report as the RL page shows it; a setting is text whatever it
holds."""

from __future__ import annotations

import html
import json

import pytest

from tests.support.run_report import build
from tpu_rl.report import run_report as report
from tpu_rl.ui.report_page import report_html

LINK = "a` [x](https://evil.example) `b"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("extra_train_args", [f"enable_goodput_recording={LINK}"]),
        ("vllm_hf_overrides", json.dumps({"note": LINK})),
        ("data_template_path", LINK),
        ("data_template_path", "``a|b` `` | c"),
    ],
)
def test_a_setting_with_backticks_or_pipes_is_text_on_the_report_page(tutorial_conf, name, value):
    built = build(tutorial_conf, **{name: value})
    page = report_html(built["run_id"], built["export_uri"], report.render_markdown(built))
    assert "evil.example</a>" not in page and 'href="https://evil.example"' not in page
    shown = html.escape(json.dumps(built["settings"][name]), quote=True)
    assert f"<td>{name}</td>\n<td><code>{shown}</code></td>" in page


def test_the_page_links_the_rl_page_the_run_and_the_object_and_escapes_raw_html():
    from tpu_rl.report.run_note import RL_PAGE

    page = report_html(
        "manual__2026-01-01T00:00:00+00:00",
        "gs://b/m/hf-trained/rl-1/run-report.md",
        "# Report\n\n<script>alert(1)</script>\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
        airflow_root="/airflow",
    )
    assert f'<a href="/airflow{RL_PAGE}">' in page
    run_page = "/airflow/dags/tpu_rl_post_training/runs/manual__2026-01-01T00%3A00%3A00%2B00%3A00"
    assert f'<a href="{run_page}">' in page
    assert "<title>Run report: manual__2026-01-01T00:00:00+00:00</title>" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<td>1</td>" in page and "<h1>Report</h1>" in page
