"""The catalogue's models: each is keyed by MaxText's name, has a cell, and gives a
run its Hugging Face repository, tokenizer and chat template."""

from __future__ import annotations

import pytest

from tpu_rl.catalogue.cells import CELLS, cells_of
from tpu_rl.catalogue.models import MODELS

MAXTEXT_CHAT_TEMPLATES = "maxtext/examples/chat_templates/"  # inside the MaxText image


def test_every_model_is_keyed_by_its_maxtext_name_and_has_a_cell():
    assert all(name == model.model_name for name, model in MODELS.items())
    assert {c.model_name for c in CELLS} == set(MODELS)


@pytest.mark.parametrize("model", MODELS.values(), ids=list(MODELS))
def test_a_models_cells_give_its_repository_tokenizer_and_chat_template(model):
    assert model.source and "/" in model.hf_id
    assert model.chat_template == "" or model.chat_template.startswith(MAXTEXT_CHAT_TEMPLATES)
    for cell in cells_of(model.model_name):
        settings = cell.settings()
        assert (
            settings["hf_model_path"],
            settings["tokenizer_path"],
            settings["chat_template_path"],
        ) == (model.hf_id, model.tokenizer, model.chat_template)
