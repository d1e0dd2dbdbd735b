"""The catalogue's models: one declaration each, keyed by MaxText's model_name.

Sources (AI-Hypercomputer/maxtext, tag maxtext-v0.2.4, commit 538fe7a, 2026-08-21):
- Conversion and export routes: every model below has MaxText's parameter mapping
  (src/maxtext/checkpoint_conversion/utils/param_mapping.py:4227-4260) and its export hooks
  (4281-4315), so each converts with to_maxtext and exports with to_huggingface with the flags
  every run passes (tpu_rl.jobs.maxtext_flags): no model needs flags of its own.
- Gating: the Hub's licence gate as declared here; the preflight's `hf model access` check
  (tpu_rl.preflight.huggingface) reads the Hub itself.
- Hugging Face defaults: src/maxtext/utils/globals.py:53-82 (HF_IDS); a model here may name
  another repository of the same architecture (an instruction-tuned one), as the RL scripts do.
- Tokenizers and chat templates: the RL scripts that each model's cells cite (cells.py).
- Parameters: billions, as the Hugging Face repository's name states them (gemma-4-26b-a4b: 26,
  gemma-4-E4B: 4 "effective", Llama-3.1-8B: 8, Llama-3.1-70B: 70, Qwen3-30B-A3B: 30,
  gpt-oss-20b: 20); the estimate's assumed step time scales with them
  (tpu_rl.report.estimate.STEP_RULE).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Model:
    """One model the catalogue runs: where it comes from and how it is converted and exported."""

    model_name: str  # MaxText's name (the model_name setting and flag)
    hf_id: str  # the Hugging Face repository converted (hf_model_path)
    tokenizer: str  # tokenizer_path
    gated: bool  # a licence to accept on Hugging Face before the token can read it
    params_b: float  # parameters, billions, as the repository's name states them
    # chat_template_path for a tokenizer that has no chat template (a base model); "": its own
    chat_template: str = ""
    source: str = ""


GEMMA4_CHAT = "maxtext/examples/chat_templates/gemma-3-27b-chat_template.json"
GPT_OSS_CHAT = "maxtext/examples/chat_templates/gpt_oss_rl.json"

MODELS: dict[str, Model] = {
    m.model_name: m
    for m in (
        # the tutorial's model (tpu_rl.settings.fields.TUTORIAL_MODEL)
        Model(
            "gemma4-26b",
            "google/gemma-4-26b-a4b-it",
            "google/gemma-4-26b-a4b-it",
            gated=True,
            params_b=26,
            source="globals.py:53; tests/end_to_end/tpu/gemma4/26b/test_gemma4_rl.sh",
        ),
        # the base model with Gemma 3's chat template: docs/tutorials/posttraining/
        # rl_gemma4_e4b.md:84 ("fine-tunes the base model (google/gemma-4-E4B)") and
        # src/maxtext/trainers/post_train/rl/scripts/run_gemma4_e4b_rl.sh (tokenizer_path,
        # chat_template_path)
        Model(
            "gemma4-e4b",
            "google/gemma-4-E4B",
            "google/gemma-4-E4B",
            gated=True,
            params_b=4,
            chat_template=GEMMA4_CHAT,
            source="docs/tutorials/posttraining/rl_gemma4_e4b.md:84; run_gemma4_e4b_rl.sh",
        ),
        # docs/tutorials/posttraining/rl.md:67 ('llama3.1-8b-Instruct' checkpoints)
        Model(
            "llama3.1-8b",
            "meta-llama/Llama-3.1-8B-Instruct",
            "meta-llama/Llama-3.1-8B-Instruct",
            gated=True,
            params_b=8,
            source="docs/tutorials/posttraining/rl.md:67; globals.py:69",
        ),
        # tests/end_to_end/tpu/llama3.1/70b/test_llama3.1_70b_rl.sh (tokenizer_path)
        Model(
            "llama3.1-70b",
            "meta-llama/Llama-3.1-70B-Instruct",
            "meta-llama/Llama-3.1-70B-Instruct",
            gated=True,
            params_b=70,
            source="tests/end_to_end/tpu/llama3.1/70b/test_llama3.1_70b_rl.sh; globals.py:72",
        ),
        # run_qwen3_30b_rl.sh and tests/end_to_end/tpu/qwen3/30b/test_qwen3_rl.sh
        Model(
            "qwen3-30b-a3b-base",
            "Qwen/Qwen3-30B-A3B-Base",
            "Qwen/Qwen3-30B-A3B-Base",
            gated=False,
            params_b=30,
            source="run_qwen3_30b_rl.sh; globals.py:75",
        ),
        # run_gptoss_20b_rl.sh and tests/end_to_end/tpu/gpt_oss/20b/test_gpt_oss_rl.sh
        # (tokenizer_path, chat_template_path)
        Model(
            "gpt-oss-20b",
            "unsloth/gpt-oss-20b-BF16",
            "unsloth/gpt-oss-20b-BF16",
            gated=False,
            params_b=20,
            chat_template=GPT_OSS_CHAT,
            source="run_gptoss_20b_rl.sh; globals.py:82",
        ),
    )
}
