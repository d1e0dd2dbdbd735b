"""Each catalogue cell follows its cited script: the rollout engine path,
optimizer, scheduling and attention flags as the script sets them (AI-Hypercomputer/maxtext at
maxtext-v0.2.4), and `follows` names where the cell departs and why."""

from __future__ import annotations

import json

import pytest

from tests.conftest import TUTORIAL_CONF
from tpu_rl.catalogue.cells import CELLS, find_cell
from tpu_rl.jobs import manifests
from tpu_rl.jobs.maxtext_flags import train_flags
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import load_settings

CELL_KEYS = ("model_name", "tpu_type", "topology", "compute_type", "cloud_image_name")


def rendered(model: str, tpu_type: str) -> tuple[list[str], dict[str, object], str]:
    """The cell's train_rl flags, its training pod's environment and its shell line."""
    conf = {k: v for k, v in json.loads(TUTORIAL_CONF.read_text()).items() if k not in CELL_KEYS}
    layout = RunLayout(
        load_settings({**conf, "model_name": model, "tpu_type": tpu_type}), "run-1", "dep"
    )
    job = manifests.train_job(layout)
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    return train_flags(layout), env, container["command"][2]


def test_gpt_oss_rolls_out_on_tpu_inferences_own_model_as_its_scripts_do():
    """run_gptoss_20b_rl.sh:82-117 runs MODEL_IMPL_TYPE=flax_nnx with no vllm_hf_overrides and
    no vllm_additional_config (so does test_gpt_oss_rl.sh): vLLM runs tpu-inference's gpt-oss,
    not MaxTextForCausalLM; a `maxtext_config` would make MaxText sync weights MaxText to
    MaxText (maxtext_vllm_rollout.py:531-537)."""
    flags, env, script = rendered("gpt-oss-20b", "v5p-64")
    assert "vllm_hf_overrides={}" in flags
    assert not [f for f in flags if "MaxTextForCausalLM" in f or "vllm_additional_config" in f]
    assert env["MODEL_IMPL_TYPE"] == "flax_nnx"
    assert {"async_scheduling=True", "enable_dp_attention=False"} <= set(flags)
    assert "optax.adafactor" not in script  # train_rl's AdamW, no patch


@pytest.mark.parametrize(
    ("model", "tpu_type"), [("llama3.1-8b", "v6e-8"), ("llama3.1-70b", "v5p-128")]
)
def test_the_llama_tutorials_roll_out_on_vllms_own_llama_with_rl_yml_defaults(model, tpu_type):
    """rl.md:110-117 and rl_on_multi_host.md:179-185 pass no vllm_hf_overrides: MaxText's
    default {} (base.yml:1338); rl.yml's async_scheduling (180) and enable_dp_attention (175)."""
    flags, env, script = rendered(model, tpu_type)
    assert "vllm_hf_overrides={}" in flags and "MODEL_IMPL_TYPE" not in env
    assert not [f for f in flags if f.startswith("vllm_additional_config=")]
    assert {"async_scheduling=True", "enable_dp_attention=False"} <= set(flags)
    assert "optax.adafactor" not in script


@pytest.mark.parametrize(
    ("model", "tpu_type", "dp_attention"),
    [("gemma4-e4b", "v6e-32", True), ("qwen3-30b-a3b-base", "tpu7x-128", True),
     ("qwen3-30b-a3b-base", "v5p-32", False)],
)  # fmt: skip
def test_the_maxtext_adapter_scripts_keep_their_scheduling_and_attention(
    model, tpu_type, dp_attention
):
    """run_gemma4_e4b_rl.sh:99,151,163; run_qwen3_30b_rl.sh:97,123,137; test_qwen3_rl.sh:80 (and
    rl.yml's defaults): MaxTextForCausalLM with its vllm_additional_config, async scheduling,
    their DP attention, AdamW."""
    flags, env, script = rendered(model, tpu_type)
    assert 'vllm_hf_overrides={"architectures": ["MaxTextForCausalLM"]}' in flags
    assert [f for f in flags if f.startswith("vllm_additional_config=")]
    assert "async_scheduling=True" in flags
    assert f"enable_dp_attention={dp_attention}" in flags
    assert "optax.adafactor" not in script and "MODEL_IMPL_TYPE" not in env


def test_the_tutorials_cell_keeps_the_tutorials_command():
    """The seed's command: the adafactor patch, async_scheduling=False, MaxTextForCausalLM."""
    flags, _, script = rendered("gemma4-26b", "v6e-32")
    assert "optax.adafactor(learning_rate=learning_rate)" in script
    assert {"async_scheduling=False", "enable_dp_attention=False"} <= set(flags)
    assert 'vllm_hf_overrides={"architectures": ["MaxTextForCausalLM"]}' in flags


def test_every_cell_says_where_it_departs_from_its_source():
    """A script's proxy XLA flags reach no setting: the cells of the three xpk scripts say so,
    with the lines; the Llama 8B cells say train_rl runs as a Pathways client."""
    for cell in CELLS:
        if "(xpk create-pathways" in cell.follows:
            assert "departs:" in cell.follows and "XLA flags are not passed" in cell.follows
    assert (
        "enable_dp_attention follows the flag (true)"
        in find_cell("qwen3-30b-a3b-base", "tpu7x-128").follows
    )
    assert "Pathways client" in find_cell("llama3.1-8b", "v5p-8").follows
    assert "opt_type=sgd (:89) is not read" in find_cell("qwen3-30b-a3b-base", "v5p-32").follows
