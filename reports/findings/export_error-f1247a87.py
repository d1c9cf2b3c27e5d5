"""[torch.export] export fails at torch._export.serde.serialize:GraphModuleSerializer.serialize_graph:
UnlimitedOcrForConditionalGeneration (export_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-f1247a87.py
The suite saw: torch.export.save: SerializeError: Failed serializing node flat_apply in graph: %flat_apply :
[num_users=2] = call_function[target=torch.ops.higher_order.flat_apply](args = (%function_const_func_spec0, ...
Shared by 4 class(es), 16 cell(s) of 4 check(s) (index.json lists them).
"""

import os
import tempfile

import torch
from transformers import (UnlimitedOcrConfig, UnlimitedOcrForConditionalGeneration, UnlimitedOcrSamVisionConfig,
    UnlimitedOcrTextConfig, UnlimitedOcrVisionConfig, UnlimitedOcrVisionEncoderConfig)

CONFIG = UnlimitedOcrConfig(
    vision_config=UnlimitedOcrVisionConfig(
        sam_config=UnlimitedOcrSamVisionConfig(hidden_size=64, output_channels=64, num_hidden_layers=2,
            num_attention_heads=4, image_size=32, patch_size=8, initializer_range=0.02, global_attn_indexes=[0, 1],
            mlp_dim=128, downsample_channels=[64, 64]),
        encoder_config=UnlimitedOcrVisionEncoderConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, image_size=32, patch_size=8)),
    text_config=UnlimitedOcrTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16, n_routed_experts=4, n_shared_experts=1,
        num_experts_per_tok=2, moe_intermediate_size=128, mlp_layer_types=['dense', 'sparse'],
        layer_types=['reference_sliding_attention', 'reference_sliding_attention']),
    image_token_id=255)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return UnlimitedOcrForConditionalGeneration(CONFIG).eval()


# The inputs export_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174, 255, 255, 255, 108, 164, 68, 44], [0, 0, 0, 153, 99, 85,
        52, 255, 255, 255, 6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 12, [0, 0, 0] + [1] * 12], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
}

def logits_of(output):
    """The logits of a model output: `logits`, a scorer's first `logits*` field, a tuple's first tensor."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict) and "logits" in output:
        return output["logits"]
    if isinstance(getattr(output, "logits", None), torch.Tensor):
        return output.logits
    if isinstance(output, dict):
        for key, value in output.items():
            if key.startswith("logits") and isinstance(value, torch.Tensor):
                return value
    return output[0]


class LogitsModule(torch.nn.Module):
    """`forward(**tensors)` -> the logits of `model(**tensors, **constants)`: the module exported."""

    def __init__(self, model, constants):
        super().__init__()
        self.model = model
        self.constants = constants

    def forward(self, **tensors):
        return logits_of(self.model(**tensors, **self.constants))


def export_and_reload(module, kwargs, strict, args=()):
    """torch.export.export(strict=...), then torch.export.save / load through a temporary .pt2."""
    with torch.no_grad():
        program = torch.export.export(module, args, kwargs=kwargs, strict=strict)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "program.pt2")
        torch.export.save(program, path)
        return torch.export.load(path)


model = tiny_model()
loaded = export_and_reload(LogitsModule(model, CONSTANTS), inputs, strict=False)
