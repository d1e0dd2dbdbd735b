"""tpu_rl.report.notify: every task without a failure callback of its own tells the channels."""

from __future__ import annotations

from types import SimpleNamespace

from tpu_rl.report.notify import RunFailureNotifier, notify_failures


def test_only_the_tasks_without_a_failure_callback_get_the_notifier():
    own = [lambda context: None]
    tasks = [SimpleNamespace(on_failure_callback=None), SimpleNamespace(on_failure_callback=own)]
    notify_failures(SimpleNamespace(tasks=tasks))
    [notifier] = tasks[0].on_failure_callback
    assert isinstance(notifier, RunFailureNotifier) and not notifier.only_when_untold
    assert tasks[1].on_failure_callback is own


def test_the_dags_callback_is_silent_on_a_task_failure_its_task_told(monkeypatch):
    """A task's failure has been told by that task's own callback: the DAG's says nothing."""
    from tpu_rl.report import failures, notices

    monkeypatch.setattr(failures, "channels", lambda failure: [])
    sent: list[object] = []
    monkeypatch.setattr(notices, "send_notices", lambda *args: sent.append(args) or [])
    RunFailureNotifier().notify({"reason": "task_failure"})
    assert sent == []
