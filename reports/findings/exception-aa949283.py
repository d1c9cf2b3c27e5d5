"""[eager] raises at transformers.models.llama4.modeling_llama4:Llama4ForConditionalGeneration.forward:
Llama4ForConditionalGeneration (build).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-aa949283.py
The suite saw: the model's own forward fails on valid inputs (transformers bug): AttributeError:
'MoeCausalLMOutputWithPast' object has no attribute 'image_outputs' (at ...
Shared by 1 class(es), 74 cell(s) of 74 check(s) (index.json lists them).
"""

import torch
from transformers import Llama4Config, Llama4ForConditionalGeneration, Llama4TextConfig, Llama4VisionConfig

CONFIG = Llama4Config(
    vision_config=Llama4VisionConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=256, vision_output_dim=64, image_size=32, patch_size=8, projector_input_dim=64,
        projector_output_dim=64),
    text_config=Llama4TextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, intermediate_size_mlp=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
        moe_layers=[0, 1], no_rope_layers=[1, 0], layer_types=['chunked_attention', 'full_attention']),
    boi_token_index=253, eoi_token_index=254, image_token_index=255)


def tiny_model():
    torch.manual_seed(0)
    return Llama4ForConditionalGeneration(CONFIG).eval()


def sample_inputs():
    """The inputs build fed: token ids literal; pixel_values seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    return {
        'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174, 253] + [255] * 4 + [254, 108, 164, 68, 44], [0, 0,
            0, 153, 99, 85, 52, 253] + [255] * 4 + [254, 6, 151, 56, 186, 77]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
        'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
    }


model = tiny_model()
with torch.no_grad():
    model(**sample_inputs())  # the eager prefill over the sample
