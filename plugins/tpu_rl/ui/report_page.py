"""The run's report (run-report.md, tpu_rl.report.run_report) as an HTML page of Airflow's UI.

The Markdown is rendered by markdown-it-py's CommonMark preset with its table rule (the report's
tables are GitHub's pipe tables) and raw HTML off, so the report's text is escaped, never markup:
markdown-it-py 4.3.0's "commonmark" preset turns `html` on (markdown_it/presets/commonmark.py
line 17), the options update turns it off, and its links refuse javascript:, vbscript:, file:
and non-image data: URLs (markdown_it/common/normalize_url.py lines 79-94, validateLink). The
page links back to the RL page, to the run in Airflow and to the report's object in the Cloud
Console.
"""

from __future__ import annotations

from html import escape
from typing import cast
from urllib.parse import quote

from markdown_it import MarkdownIt

from tpu_rl.layout import console_object_url
from tpu_rl.names import DAG_ID
from tpu_rl.report.run_note import RL_PAGE

STYLE = """
body { font: 14px/1.5 system-ui, sans-serif; margin: 1.5em auto; max-width: 72em; padding: 0 1em; }
nav { margin-bottom: 1em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
code { background: #f3f3f3; padding: 0 0.2em; }
"""
# the page holds no script and loads nothing: its own style, and links out
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "Cache-Control": "no-cache",
}


def markdown_html(text: str) -> str:
    """The Markdown as HTML: CommonMark with tables, raw HTML escaped."""
    # render's result is typed Any: the default renderer_cls, RendererHTML, returns a str
    # (markdown_it/main.py, MarkdownIt.__init__)
    return cast(str, MarkdownIt("commonmark", {"html": False}).enable("table").render(text))


def report_html(run_id: str, uri: str, text: str, airflow_root: str = "") -> str:
    """The whole page: links to the RL page, the run and the object, then the report."""
    run_page = f"{airflow_root}/dags/{quote(DAG_ID, safe='')}/runs/{quote(run_id, safe='')}"
    links = [
        f'<a href="{escape(airflow_root + RL_PAGE)}">All runs: RL post-training page</a>',
        f'<a href="{escape(run_page)}">this run in Airflow</a>',
        f'<a href="{escape(console_object_url(uri))}">{escape(uri)}</a>',
    ]
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Run report: {escape(run_id)}</title><style>{STYLE}</style></head>\n<body>"
        f"<nav>{' · '.join(links)}</nav>\n<main>\n{markdown_html(text)}</main>\n</body></html>\n"
    )
