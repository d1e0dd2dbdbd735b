"""`make bench`: measure every figure beside its baseline and write bench.json.

python -m tests.bench.run [OUT]     (default bench.json; PYTHONPATH=plugins:. as make sets)
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.bench import dag_runs, log_reads, parse, restart, trigger_memory
from tests.sandbox.harness import SETTINGS, Sandbox


def measure_all(tmp: Path) -> dict[str, dict[str, Any]]:
    metrics = parse.measure()
    box = Sandbox(tmp / "waits")
    box.tmp.mkdir()
    with box.up(existing_cluster=SETTINGS["cluster_name"]):
        metrics["log_read_amplification"] = log_reads.measure(box, dict(SETTINGS))
        metrics["triggerer_restart_reread_bytes"] = restart.measure(box, dict(SETTINGS))
        metrics["trigger_peak_memory_mib"] = trigger_memory.measure(box, dict(SETTINGS))
    metrics.update(dag_runs.measure(tmp))
    return metrics


def table(metrics: dict[str, dict[str, Any]]) -> str:
    rows = [("metric", "value", "baseline", "vs baseline", "goal", "met")]
    for name, m in metrics.items():
        unit = "" if m["unit"] == "ratio" else f" {m['unit']}"
        rows.append(
            (
                name,
                f"{m['value']:.4g}{unit}",
                f"{m['baseline']:.4g}{unit}",
                "-" if m["vs_baseline"] is None else f"{m['vs_baseline']:.3g}x",
                m["goal"]
                if not m["goal"].removeprefix("<= ").replace(".", "").isdigit()
                else m["goal"] + unit,
                "yes" if m["goal_met"] else "NO",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import airflow

    out = Path(argv[0] if argv else "bench.json")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tpu-rl-bench-") as tmp:
        metrics = measure_all(Path(tmp))
    report = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_s": round(time.monotonic() - started, 1),
        "python": platform.python_version(),
        "airflow": airflow.__version__,
        "poll_interval_s": dag_runs.POLL_S,
        "metrics": metrics,
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n{table(metrics)}\n\n{out} written in {report['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
