"""A scripted lm-eval model on the benchmark the repository ships
(tests/fixtures/heldout/depot_arithmetic.yaml, GSM8K's task with other data): lm-eval's own task
code scores what the script answers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

FIXTURES = Path(__file__).parents[1] / "fixtures" / "heldout"
ITEMS = [json.loads(line) for line in (FIXTURES / "depot_arithmetic.jsonl").open()]
# Items by index: which each model answers right, and how the candidate writes a right answer
# for the strict filter to miss (the number without GSM8K's `#### `)
CHAMPION_RIGHT = set(range(0, 40))
CANDIDATE_RIGHT = set(range(4, 56))  # 36 both, 16 candidate only, 4 champion only, 4 neither
CANDIDATE_UNMARKED = {50, 51}  # right, but as "The answer is N." (flexible-extract takes it)


def answer(item: dict[str, Any]) -> str:
    return item["answer"].split("#### ")[1]


class ScriptedModel:
    """An lm-eval model (generate_until only) that answers each question as its script says."""

    def __init__(self, right: set[int], unmarked: set[int] = frozenset()) -> None:
        from lm_eval.api.model import LM

        questions = {item["question"]: i for i, item in enumerate(ITEMS)}

        class Scripted(LM):
            def generate_until(self, requests):
                replies = []
                for request in requests:
                    prompt = request.args[0]
                    [question] = re.findall(r"Question: (.*)\nAnswer:$", prompt)
                    i = questions[question]
                    number = answer(ITEMS[i]) if i in right else "17"
                    reply = f" Working it out.\n#### {number}"
                    replies.append(f" The answer is {number}." if i in unmarked else reply)
                return replies

            def loglikelihood(self, requests):
                raise NotImplementedError("a generate_until task only")

            def loglikelihood_rolling(self, requests):
                raise NotImplementedError("a generate_until task only")

        self.lm = Scripted()


def evaluate(model: ScriptedModel, cache: Path, **options: Any) -> dict[str, Any]:
    """lm-eval's simple_evaluate of `model` on the shipped task, samples logged (`options`: more
    of simple_evaluate's arguments). The task is a config, not a name: its TaskManager skips
    indexing lm-eval's own task folders (include_defaults, lm_eval/tasks/manager.py), 5 CPU-s a
    call."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    task = yaml.safe_load((FIXTURES / "depot_arithmetic.yaml").read_text())
    task["dataset_kwargs"] = {
        "data_files": {"train": str(FIXTURES / "depot_arithmetic.jsonl")},
        "cache_dir": str(cache),
    }
    return lm_eval.simple_evaluate(
        model=model.lm,
        tasks=[task],
        task_manager=TaskManager(include_defaults=False),
        **{"log_samples": True, **options},
    )
