"""[torch.export] data-dependent guard at transformers.vision_utils:get_vision_nearest_position_ids:
MiniCPMV4_7ForConditionalGeneration (export_dynamic).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-9723fdd7.py
The suite saw: torch.export.export(strict=False) with attention_mask dim 1, input_ids dim 1, mm_token_type_ids dim 1
dynamic: GuardOnDataDependentSymNode: Could not extract specialized integer from data-dependent expression u0 ...
Shared by 3 class(es), 84 cell(s) of 28 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import (MiniCPMV4_7Config, MiniCPMV4_7ForConditionalGeneration, MiniCPMV4_7VisionConfig,
    Qwen3_5TextConfig)
from torch.export import Dim

CONFIG = MiniCPMV4_7Config(
    text_config=Qwen3_5TextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
        rope_parameters={'rope_theta': 10000.0, 'partial_rotary_factor': 0.25, 'rope_type': 'default',
            'mrope_section': [1, 1, 1]},
        head_dim=24, linear_key_head_dim=16, linear_value_head_dim=16,
        layer_types=['linear_attention', 'full_attention']),
    vision_config=MiniCPMV4_7VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8),
    image_size=32, image_token_id=255, video_token_id=254, patch_size=8)
CONSTANTS = {'use_cache': False}
DYNAMIC = {'attention_mask': [1], 'input_ids': [1], 'mm_token_type_ids': [1]}


def tiny_model():
    torch.manual_seed(0)
    return MiniCPMV4_7ForConditionalGeneration(CONFIG).eval()


# The inputs export_dynamic fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 117, 92, 148, 160, 110, 255, 198, 103, 40, 116], [0, 0, 119, 119, 88, 144, 255,
        255, 5, 181, 169, 129, 67]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 10, [0, 0] + [1] * 11], dtype=torch.int64),
    'pixel_values': torch.randn((1, 3, 8, 384), generator=g, dtype=torch.float32),
    'target_sizes': torch.tensor([[4, 4], [4, 8]], dtype=torch.int32),
    'mm_token_type_ids': torch.tensor([[0] * 8 + [1] + [0] * 4, [0] * 6 + [1, 1] + [0] * 5], dtype=torch.int64),
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


class NamedLogitsModule(LogitsModule):
    """`LogitsModule` whose forward names its tensor inputs (for a dynamic_shapes spec by name)."""

    def __init__(self, model, names, constants):
        super().__init__(model, constants)

        def forward(**tensors):
            return LogitsModule.forward(self, **tensors)

        forward.__signature__ = inspect.Signature(
            [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in names])
        self.forward = forward


shapes = {name: ({d: Dim.AUTO for d in DYNAMIC[name]} if name in DYNAMIC else None) for name in inputs}
module = NamedLogitsModule(tiny_model(), list(inputs), CONSTANTS)
with torch.no_grad():
    torch.export.export(module, (), kwargs=inputs, dynamic_shapes=shapes, strict=False)
