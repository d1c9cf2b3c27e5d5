"""Self-tests of the export_generate and executorch checks on small synthetic inputs (executorch without its
extra: `test_not_run.py`)."""

from __future__ import annotations

import pytest
import torch

from conformance.checks.common.generation import (
    ExportedGeneration,
    eager_tokens,
    generation_owner,
    image_features,
    single_prompt,
)
from conformance.checks.common.shapes import dynamic_inputs

pytestmark = pytest.mark.meta


def _batch():
    ids = torch.tensor([[0, 0, 0, 5, 9, 9, 6], [0, 7, 5, 9, 9, 6, 8]])
    mask = (ids != 0).long()
    mask[1, 0] = 0
    return {"input_ids": ids, "attention_mask": mask, "pixel_values": torch.randn(2, 3, 4, 4)}


def test_single_prompt_takes_the_second_row_without_padding():
    batch = _batch()
    one = single_prompt(batch)
    assert one["input_ids"].tolist() == [[7, 5, 9, 9, 6, 8]]
    assert one["attention_mask"].tolist() == [[1] * 6]
    assert torch.equal(one["pixel_values"], batch["pixel_values"][1:2])


def test_single_prompt_cuts_flattened_patches_by_grid():
    batch = _batch()
    batch["pixel_values"] = torch.arange(10.0).view(10, 1)
    batch["image_grid_thw"] = torch.tensor([[1, 2, 2], [1, 2, 3]])
    one = single_prompt(batch)
    assert one["pixel_values"].view(-1).tolist() == [4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    assert one["image_grid_thw"].tolist() == [[1, 2, 3]]


def test_image_features_flattens_outputs_lists_and_pooler():
    class Out:
        pooler_output = torch.ones(2, 3, 8)

    assert image_features(Out()).shape == (6, 8)
    assert image_features([torch.ones(4, 8), torch.ones(1, 2, 8)]).shape == (6, 8)
    assert image_features(torch.ones(1, 5, 8)).shape == (5, 8)


def _tiny_lm():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=64, max_position_embeddings=64)
    return LlamaForCausalLM(config).eval()


def test_generation_owner_is_the_model_unless_generate_is_handed_to_a_language_model():
    lm = _tiny_lm()
    assert generation_owner(lm) is lm

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.language_model = lm

        def generate(self, **kwargs):
            return self.language_model.generate(**kwargs)

    assert generation_owner(Wrapper()) is lm


def test_programs_generate_the_eager_tokens_of_a_text_model():
    torch.set_num_threads(1)
    inputs = {"input_ids": torch.tensor([[3, 14, 15, 9, 26]]), "attention_mask": torch.ones(1, 5, dtype=torch.long)}
    generation = ExportedGeneration(_tiny_lm(), inputs, new_tokens=4)
    assert set(generation.export()) == {"embed_prefill", "embed_step", "prefill", "step"}
    assert not any(dynamic_inputs(program) for program in generation.programs.values())  # every part is static
    tokens, _ = generation.generate()
    assert torch.equal(tokens, eager_tokens(_tiny_lm(), inputs, 4))
    # Called again, the programs start from a fresh cache: same tokens.
    again, _ = generation.generate()
    assert torch.equal(again, tokens)


def test_a_wrong_step_program_changes_the_tokens():
    torch.set_num_threads(1)
    inputs = {"input_ids": torch.tensor([[3, 14, 15, 9, 26]])}
    generation = ExportedGeneration(_tiny_lm(), inputs, new_tokens=4)
    generation.export()
    good, _ = generation.generate()

    def broken(name, *args, **kwargs):
        out = generation.run_program(name, *args, **kwargs)
        return -out if name == "step" else out

    bad, _ = generation.generate(run=broken)
    assert not torch.equal(good, bad)



def test_media_that_reach_the_model_without_placeholder_tokens_are_not_split():
    """A prompt with media but no placeholder of the config's image token (a model that places its image
    embeddings by a position mask): the parts cannot scatter features into it, so the generation columns do not
    apply, said with why; never a contract failure of the model."""
    from transformers import PretrainedConfig

    from conformance.checks.common import generation
    from conformance.checks.common.outcome import NotApplicable

    class Owner(torch.nn.Module):
        config = PretrainedConfig(image_token_id=99)

        def forward(self, input_ids=None, attention_mask=None, inputs_embeds=None):
            return input_ids

        def get_image_features(self, pixel_values):
            return pixel_values

        def generate(self, **kwargs):
            return kwargs["input_ids"]

    model = Owner()
    inputs = {"input_ids": torch.tensor([[5, 6, 7]]), "pixel_values": torch.zeros(1, 3, 4, 4)}
    with pytest.raises(NotApplicable, match="another route than placeholder tokens"):
        generation.ExportedGeneration(model, inputs)
