"""MaxText's `train_rl` around Tunix's real GRPO trainer, on the toy model Tunix ships: the
real trainer the trainer tier runs, on CPU in its own venv (`make venv-trainer`,
requirements-trainer.lock).

Runs in `.venv-trainer` only (it imports jax, flax, optax, tunix): the sandbox starts it as the
training pod's process (sandbox.real_trainer.process) and `make corpus` records it.

What is real: Tunix's `RLCluster` and `GRPOLearner` (tunix/rl/grpo/grpo_learner.py at 0.1.7)
with the vanilla rollout on `tunix.tests.test_common.ToyTransformer` and `MockVocab`; its absl
`Train step N training loss: X  - training perplexity: Y` lines (tunix/sft/peft_trainer.py:489);
its TensorBoard event files (metrics_logger -> metrax -> tensorboardX) and its Orbax
checkpoints (tunix/sft/checkpoint_manager.py). What is MaxText's, rebuilt here with the same
text: the `Pre RL Training:`, `Intermediate Eval (step=N):` (maxtext trainers/post_train/rl/
hooks.py RLTrainingHooks.on_train_step_end: every `eval_interval` outer steps),
`RL Training Completed Successfully!` and `Post RL Training:` lines (train_rl.py), and the
layout `<base_output_directory>/<run_name>/{checkpoints/actor,tensorboard}` (rl.yml's).

The toy task: a prompt of MockVocab words; a completion earns 1 for each target word it holds
(reward in [0, 1], `corr` counts completions whose reward is at least 0.5).

Faults are produced by the trainer, not drawn: `--fault lr_collapse` trains with a learning rate
that collapses the policy; `overflow` scales the rewards so that GRPO's advantages overflow to
nan from `--fault-step`'s batch on (that step's loss line is nan, its update poisons the
weights); `stall` stops this process (SIGSTOP to itself) inside step `--fault-step`'s update,
as a hung collective would; `kl_blowup` turns the learning rate
-100-fold from `--fault-step` on (gradient ascent), so the policy leaves the reference.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

WORDS = ("hello", "world", "Hello", "there", "My", "name", "is", "Tunix", "library", "training")
TARGET = ("Tunix", "library")
OVERFLOW_REWARD = 1e308  # --fault overflow's reward scale (float64's largest is 1.8e308)
PROMPTS = (
    "hello world",
    "My name is",
    "hello there",
    "input string",
    "Hello there !",
    "My name",
    "distributed training",
    "Tunix library",
)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-output-directory", required=True, help="a local folder")
    p.add_argument("--run-name", default="rl")
    p.add_argument("--steps", type=int, default=20, help="num_batches")
    p.add_argument("--beta", type=float, default=0.04)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--num-generations", type=int, default=2)
    p.add_argument("--num-layers", type=int, default=1, help="the toy model's depth (width)")
    p.add_argument("--max-tokens", type=int, default=10, help="completion length")
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-period", type=int, default=5)
    p.add_argument("--eval-interval", type=int, default=5)
    p.add_argument("--log-period", type=int, default=20, help="TensorBoard flush every n steps")
    p.add_argument("--fault", choices=("none", "lr_collapse", "overflow", "stall", "kl_blowup"))
    p.add_argument("--fault-step", type=int, default=0)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # imports here: parse() and --help need no JAX
    import grain.python as grain
    import jax
    import numpy as np
    import optax
    import orbax.checkpoint as ocp
    from absl import logging
    from flax import nnx
    from jax.sharding import Mesh
    from tunix.rl import rl_cluster as rl
    from tunix.rl.grpo import grpo_learner as grpo
    from tunix.rl.rollout import base_rollout
    from tunix.sft import hooks, metrics_logger
    from tunix.tests import test_common as tc

    logging.set_verbosity(logging.INFO)
    logging.use_absl_handler()
    base = os.path.join(args.base_output_directory, args.run_name)
    logging.info("Config param run_name: %s", args.run_name)
    vocab = tc.MockVocab()
    config = tc.ModelConfig(vocab_size=vocab.GetPieceSize(), num_layers=args.num_layers)
    actor = tc.ToyTransformer(config=config, rngs=nnx.Rngs(args.seed))
    reference = tc.ToyTransformer(config=config, rngs=nnx.Rngs(args.seed))
    # a Mesh by hand (Auto axes): the toy model fails with a sharding error on jax.make_mesh's
    # mesh, whose axes are Explicit in jax 0.10.2 (requirements-trainer.lock)
    mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("fsdp", "tp"))
    fault, fault_step = args.fault or "none", args.fault_step
    lr = args.learning_rate * (1000.0 if fault == "lr_collapse" else 1.0)

    # kl_blowup: the learning rate turns -100x, gradient ascent (a sign bug): the policy leaves
    # the reference and its reward (a 100x rate alone collapsed the toy onto the rewarded word)
    def schedule(count):
        """The learning rate of update count + 1 (optax counts updates from 0)."""
        if fault == "kl_blowup":
            return jax.numpy.where(count >= fault_step - 1, -100.0 * lr, lr)
        return lr

    optimizer = optax.adamw(schedule)
    rollout = base_rollout.RolloutConfig(
        max_tokens_to_generate=args.max_tokens,
        max_prompt_length=16,
        kv_cache_size=64,
        temperature=1.0,
    )
    cluster = rl.RLCluster(
        actor=actor,
        reference=reference,
        tokenizer=vocab,
        cluster_config=rl.ClusterConfig(
            role_to_mesh={rl.Role.ACTOR: mesh, rl.Role.REFERENCE: mesh, rl.Role.ROLLOUT: mesh},
            rollout_engine="vanilla",
            offload_to_cpu=False,
            training_config=rl.RLTrainingConfig(
                actor_optimizer=optimizer,
                eval_every_n_steps=10**9,  # MaxText's hook evaluates instead (hooks.py)
                max_steps=args.steps,
                checkpoint_root_directory=os.path.join(base, "checkpoints"),
                checkpointing_options=ocp.CheckpointManagerOptions(
                    save_interval_steps=args.checkpoint_period, max_to_keep=10
                ),
                metrics_logging_options=metrics_logger.MetricsLoggerOptions(
                    log_dir=os.path.join(base, "tensorboard"),
                    flush_every_n_steps=args.log_period,
                ),
            ),
            rollout_config=rollout,
        ),
    )

    def score(completions) -> list[float]:
        """1 for each target word in the completion, over its length: in [0, 1]."""
        out = []
        for text in completions:
            words = text.split()
            hits = sum(w in TARGET for w in words)
            out.append(hits / max(len(words), 1))
        return out

    def target_reward(prompts, completions, **_kwargs):
        """The training reward: `score`, but from `--fault-step`'s batch on with `--fault
        overflow` each reward is near float64's largest, so that the group's sum overflows in
        GRPO's advantages (tunix/rl/algo_core.py compute_advantages: inf - inf, inf / inf):
        the advantages, and that update's loss, are nan. A batch is scored before its update
        starts, while global_steps still counts the updates before it."""
        del prompts
        scores = score(completions)
        if fault == "overflow" and int(cluster.global_steps) + 1 >= fault_step:
            return [OVERFLOW_REWARD * (1.0 + s) for s in scores]
        return scores

    learner = grpo.GRPOLearner(
        rl_cluster=cluster,
        reward_fns=target_reward,
        algo_config=grpo.GRPOConfig(
            num_generations=args.num_generations, num_iterations=1, beta=args.beta
        ),
    )

    def evaluate() -> str:
        """MaxText's evaluation line fields (evaluate_rl.py): greedy-free sampling of the test
        prompts, scored by the training reward."""
        out = cluster.generate(list(PROMPTS), mode=rl.Mode.EVAL if hasattr(rl, "Mode") else None)
        rewards = score(out.text)
        corr = sum(r >= 0.5 for r in rewards)
        total = len(rewards)
        fmt = sum(bool(t.strip()) for t in out.text)
        mean = float(np.mean(rewards)) if rewards else 0.0
        accuracy = 100.0 * corr / total
        return (
            f"corr={corr}, total={total}, accuracy={accuracy}%, partial_accuracy={accuracy}%, "
            f"format_accuracy={100.0 * fmt / total}%, mean_reward={mean:.4f}"
        )

    class MaxTextHooks(hooks.TrainingHooks):
        """MaxText's RLTrainingHooks: an evaluation every `eval_interval` outer steps; and the
        faults that strike inside an update."""

        def __init__(self) -> None:
            self.last = -1

        def on_train_start(self, train_ctx):
            del train_ctx

        def on_train_end(self, train_ctx):
            del train_ctx

        def on_train_step_start(self, train_ctx):
            step = int(cluster.global_steps) + 1
            # the vanilla rollout samples with PRNGKey(0) at every call when no seed is set
            # (tunix/generate/sampler.py:835-836): a key per step, as a run's data would vary
            rollout.seed = args.seed * 1_000_003 + step  # an int: a fresh key at each call
            if fault == "stall" and step == fault_step:
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGSTOP)

        def on_eval_step_start(self, train_ctx):
            del train_ctx

        def on_eval_step_end(self, train_ctx, *args, **kwargs):
            del train_ctx, args, kwargs

        def on_train_step_end(self, trainer, step, loss):
            del trainer, loss
            outer = int(cluster.global_steps)
            if outer <= 0 or outer == self.last or outer % args.eval_interval:
                return
            self.last = outer
            logging.warning("Intermediate Eval (step=%d): %s", outer, evaluate())

    cluster.actor_trainer.with_training_hooks(MaxTextHooks())
    logging.warning("Pre RL Training: %s", evaluate())
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(args.steps * args.batch_size)]
    data = (
        grain.MapDataset.source(prompts)
        .batch(args.batch_size)
        .map(lambda batch: {"prompts": batch, "answer": batch})
    )
    learner.train(data)
    logging.warning("RL Training Completed Successfully!")
    logging.warning("Post RL Training: %s", evaluate())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
