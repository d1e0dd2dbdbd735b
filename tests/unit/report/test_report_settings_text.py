"""The report's settings table shows each value as text, whatever it holds (issue 60, item 6a)."""

from __future__ import annotations

import html
import json

import pytest

from tpu_rl.report import run_report as report
from tpu_rl.ui.report_page import report_html

from .test_run_report import build

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


def test_a_plain_value_keeps_its_single_backtick_span():
    assert report.code_cell('"abc"') == '`"abc"`'
    assert report.code_cell("`x`") == "`` `x` ``"
