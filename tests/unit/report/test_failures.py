"""An error's line as a run's note, notice and `make demo` show it (report/failures.first_line)."""

from __future__ import annotations

import re

from tpu_rl.report.failures import first_line
from tpu_rl.settings.run_settings import load_settings


def test_a_refused_settings_line_names_every_refused_setting():
    """make demo-ui's run with 8 invalid settings had a note saying only the first
    ('8 invalid setting(s): - learning_rte: unknown setting ...'); the other 7 were in
    validate's log alone."""
    conf = {"learning_rte": 1e-6, "num_batches": -1, "project": "", "region": "mars"}
    try:
        load_settings(conf)
    except Exception as error:  # the refusal validate raises
        refused, line = str(error).splitlines(), first_line(error)
    assert refused[0] == "8 invalid setting(s):", refused
    assert line.startswith("8 invalid setting(s): learning_rte: unknown setting"), line
    items = [item.removeprefix("- ") for item in refused[1:]]
    listed = re.sub(r" and \d+ more$", "", line.removeprefix("8 invalid setting(s): "))
    shown = listed.split("; ")
    assert shown == items[: len(shown)] and len(shown) >= 7, line
    assert line.endswith(f" and {8 - len(shown)} more") or len(shown) == 8, line


def test_a_long_list_ends_with_how_many_more():
    from tpu_rl.report.failures import FIRST_LINE_CHARS

    items = "\n".join(f"- s{i}: {'x' * 40}" for i in range(30))
    error = RuntimeError(f"30 invalid setting(s):\n{items}")
    line = first_line(error)
    assert len(line) <= FIRST_LINE_CHARS
    shown = line.count("; ") + 1
    assert line.endswith(f" and {30 - shown} more"), line
