"""The report's settings table shows each value as text, whatever it holds."""

from __future__ import annotations

from tpu_rl.report import run_report as report


def test_a_plain_value_keeps_its_single_backtick_span():
    assert report.code_cell('"abc"') == '`"abc"`'
    assert report.code_cell("`x`") == "`` `x` ``"
