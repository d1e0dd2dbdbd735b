"""`make bench`: measure every figure beside its baseline and write bench.json.

python -m tools.bench.run [OUT]     (default bench.json; PYTHONPATH=plugins:. as make sets)
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox.harness import SETTINGS, Sandbox
from tools.bench import (
    capacity,
    capacity_trace,
    checkpoint_listing,
    dag_runs,
    log_reads,
    parse,
    promotions,
    real_runs,
    restart,
    training_health,
    trigger_memory,
    trigger_scaling,
)


def measure_all(tmp: Path, done: Callable[[dict[str, dict[str, Any]]], None]) -> None:
    """Measure everything; `done` gets each phase's metrics as soon as they are in."""
    done(parse.measure())
    done(real_runs.measure())  # the watchdog on the corpus of real GRPO runs
    done(promotions.measure())  # the paired verdict against mean against mean
    spot = capacity.start_spot(tmp)  # counts steps: beside the phases that count bytes
    box = Sandbox(tmp / "waits")
    box.tmp.mkdir()
    with box.up(existing_cluster=SETTINGS["cluster_name"]):
        for name, phase in (
            ("log_read_amplification", log_reads),
            ("triggerer_restart_reread_bytes", restart),
            ("trigger_peak_memory_mib", trigger_memory),
        ):
            done({name: phase.measure(box, dict(SETTINGS))})
        done(checkpoint_listing.measure(box))
        done(trigger_scaling.measure(box, dict(SETTINGS)))
    done(capacity.measure_spot(tmp, spot))
    done(dag_runs.measure(tmp))
    done(training_health.measure_all(tmp / "health"))  # the watchdog's fault matrix, one at a time
    done(capacity.measure_utilization(tmp))
    done(capacity_trace.measure(tmp))  # whole runs on a capacity trace: two at a time


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
    metrics: dict[str, dict[str, Any]] = {}
    report = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "airflow": airflow.__version__,
        "poll_interval_s": dag_runs.POLL_S,
        "complete": False,
        "metrics": metrics,
    }

    phases: dict[str, float] = {}
    report["phase_wall_s"] = phases

    def done(phase: dict[str, dict[str, Any]]) -> None:
        """Keep the phase's metrics, print them, and write what is in so far."""
        metrics.update(phase)
        elapsed = round(time.monotonic() - started, 1)
        if phase:
            phases[", ".join(phase)] = round(elapsed - report.get("wall_s", 0.0), 1)
        report["wall_s"] = elapsed
        out.write_text(json.dumps(report, indent=2) + "\n")
        for name, m in phase.items():
            met = "met" if m["goal_met"] else "NOT met"
            print(
                f"BENCH {name}: {m['value']:.4g} {m['unit']} (baseline {m['baseline']:.4g}, {met})"
            )

    with tempfile.TemporaryDirectory(prefix="tpu-rl-bench-") as tmp:
        measure_all(Path(tmp), done)
    report["complete"] = True
    done({})
    print(f"\n{table(metrics)}\n\n{out} written in {report['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
