"""The demo's summary lines, in words: the gate, the rewards, each evaluation, the export, the
promotion and what the cleanup removed (tools.demo prints them)."""

from __future__ import annotations

from typing import Any


def gate_line(state: str | None, gate: dict[str, Any] | None, min_gain: float) -> str:
    """What the reward gate decided, in words."""
    if state == "success" and gate:
        return (
            f"passed: post {gate['post_mean_reward']:.4f} >= pre {gate['pre_mean_reward']:.4f}"
            f" + min_reward_gain {min_gain:g}"
        )
    if state == "failed":
        return "stopped the export (its reason is in the log)"
    return f"not reached ({state})" if state else "not reached"


def removed_line(removed: dict[str, list[str]]) -> str:
    """cleanup_kubernetes's XCom, e.g. `3 jobs (a, b, c), 1 secret (d)`."""
    parts = [
        f"{len(names)} {kind if len(names) != 1 else kind.removesuffix('s')} ({', '.join(names)})"
        for kind, names in removed.items()
        if names
    ]
    return "; ".join(parts) or "nothing"


def rewards_line(rewards: dict[str, Any]) -> str:
    """Both rewards, or that training never reported them."""
    pre, post = (rewards.get(k) or {} for k in ("pre", "post"))
    if not post:
        return "rewards:  none (the run stopped before training reported them)"
    return (
        f"rewards:  mean_reward pre {pre.get('mean_reward')} -> post {post.get('mean_reward')}"
        f", accuracy {pre.get('accuracy')}% -> {post.get('accuracy')}%"
    )


def promoted_line(promoted: Any) -> str:
    """The champion record promote wrote, or that it did not run."""
    if not isinstance(promoted, dict):
        return "no (see the run's approve and promote tasks)"
    return f"champion of this deployment since this run: {promoted.get('champion_uri')}"


def evaluation_lines(rewards: dict[str, Any], gate: dict[str, Any] | None) -> list[str]:
    """Each metric per evaluated step (pre = step 0, post = the final step), exported: *."""
    from tpu_rl.settings.choices import EVAL_METRICS
    from tpu_rl.training_log.evaluations import step_table

    rows = step_table(rewards, (gate or {}).get("checkpoint"))
    heads = "".join(
        f"{('?' if r['step'] is None else str(r['step'])) + '*' * r['chosen']:>8}" for r in rows
    )
    lines = [f"evals:    step             {heads}"] if rows else []
    for name in EVAL_METRICS if rows else ():
        cells = "".join("     n/a" if r[name] is None else f"{r[name]:8.4g}" for r in rows)
        lines.append(f"          {name:<17}{cells}")
    return lines


def export_line(result: Any) -> str:
    """Where the export is, and which step it took and why (the gate's choice: export's)."""
    uri = result.xcoms.get("verify.return_value")
    choice = (result.xcoms.get("gate.return_value") or {}).get("checkpoint")
    why = f" (step {choice['step']}*: {choice['reason']})" if uri and choice else ""
    return f"export:   {uri or 'none'}{why}"


def watchdog_lines(anomaly: dict[str, Any] | None) -> list[str]:
    """The watchdog's stop (wait_for_rewards' XCom `anomaly`) and what to do next, if any."""
    if not anomaly:
        return []
    from tpu_rl.watch.health import next_step

    kept = anomaly.get("healthy_checkpoint") or "none"
    return [
        f"watchdog: {anomaly['rule']} at step {anomaly['step']} "
        f"(health_action={anomaly.get('action')}): {anomaly['why']}",
        f"          no checkpoint from step {anomaly['anomaly_step']} on is used; healthy: {kept}",
        f"          {next_step(anomaly)}",
    ]


def clock_line(time_scale: float) -> str:
    """Why the report's TPU hours read about zero: the sandbox's clock runs `1 / time_scale`
    times faster than a real run's (sandbox.harness.Sandbox.run's time_scale)."""
    return (
        f"sandbox:  time compressed about {1 / time_scale:.0f}x, so the report's TPU hours "
        '("8 hosts x 0.00 h") and cost round to about 0; a real run\'s are its own'
    )
