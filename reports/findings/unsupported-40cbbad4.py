"""[torch.export] unsupported construct at transformers.utils.generic:can_return_tuple.<locals>.wrapper:
InstructBlipForConditionalGeneration (export_static_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python unsupported-40cbbad4.py
The suite saw: decode program: torch.export.export(strict=True): Unsupported: failed to bind arguments when
attempting to inline (at transformers/utils/generic.py:1036)
Shared by 3 class(es), 9 cell(s) of 3 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import (InstructBlipConfig, InstructBlipForConditionalGeneration, InstructBlipQFormerConfig,
    InstructBlipVisionConfig, OPTConfig)

CONFIG = InstructBlipConfig(
    vision_config=InstructBlipVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, initializer_range=0.02),
    qformer_config=InstructBlipQFormerConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, encoder_hidden_size=64),
    text_config=OPTConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, ffn_dim=128, word_embed_proj_dim=64,
        num_attention_heads=4),
    image_token_index=255)
CONSTANTS = {}
MAX_LEN = 50
HEADS = 4
HEAD_DIM = 16


def tiny_model():
    torch.manual_seed(0)
    return InstructBlipForConditionalGeneration(CONFIG).eval()


# The inputs export_static_cache fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[1, 1, 1, 44, 153, 99, 85, 52] + [255] * 32 + [6, 151, 56, 186], [1, 1, 1, 77, 83, 16,
        105] + [255] * 32 + [69, 173, 110, 178, 110]], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
    'qformer_input_ids': torch.tensor([[46, 75, 85, 82], [90, 43, 68, 45]], dtype=torch.int64),
    'qformer_attention_mask': torch.full((2, 4), 1, dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 41, [0, 0, 0] + [1] * 41], dtype=torch.int64),
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


def static_cache(config, max_len, batch_size):
    """The StaticCache generate makes for cache_implementation="static" (the decoder's text config)."""
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kwargs = {"config": config, "max_cache_len": max_len}
    for name in ("max_batch_size", "batch_size"):
        if name in params:
            kwargs[name] = batch_size
    return StaticCache(**kwargs)


def full_static_layers(cache, max_len):
    """Each sliding-window layer whose window holds the whole generation made a plain StaticLayer."""
    from transformers.cache_utils import StaticLayer, StaticSlidingWindowLayer

    for i, layer in enumerate(getattr(cache, "layers", [])):
        if isinstance(layer, StaticSlidingWindowLayer) and layer.max_cache_len >= max_len:
            cache.layers[i] = StaticLayer(max_len)
    return cache


class StaticCacheModule(torch.nn.Module):
    """The model over a StaticCache initialized up front whose tensors are buffers; forward takes the inputs,
    `cache_position` (copied into every layer's write counter) and a 2D mask over all slots."""

    def __init__(self, model, cache_kwarg, text_config, constants, batch, max_len, heads, head_dim):
        super().__init__()
        self.model, self.cache_kwarg, self.constants = model, cache_kwarg, constants
        self.cache = full_static_layers(static_cache(text_config, max_len, batch), max_len)
        if hasattr(self.cache, "early_initialization"):
            self.cache.early_initialization(batch, heads, head_dim, model.dtype, model.device)
        for i, layer in enumerate(getattr(self.cache, "layers", [])):
            for name in ("keys", "values", "cumulative_length"):
                if isinstance(getattr(layer, name, None), torch.Tensor):
                    self.register_buffer(f"cache_{name}_{i}", getattr(layer, name), persistent=False)
        self.takes_cache_position = "cache_position" in inspect.signature(model.forward).parameters

    def forward(self, cache_position, attention_mask, **tensors):
        for layer in getattr(self.cache, "layers", []):
            if isinstance(getattr(layer, "cumulative_length", None), torch.Tensor):
                layer.cumulative_length.copy_(cache_position[0])
        kwargs = dict(tensors, **self.constants, attention_mask=attention_mask, use_cache=True)
        kwargs[self.cache_kwarg] = self.cache
        if self.takes_cache_position:
            kwargs["cache_position"] = cache_position
        return logits_of(self.model(**kwargs))


def slot_mask(mask2d, max_len):
    """The prompt's 2D mask over every cache slot (later slots 1: causality hides the future)."""
    return torch.nn.functional.pad(mask2d, (0, max_len - mask2d.shape[1]), value=1)


mask2d = inputs.pop("attention_mask", None)
mask2d = torch.ones_like(inputs["input_ids"]) if mask2d is None else mask2d

def wrapper():
    model = tiny_model()
    return StaticCacheModule(model, 'cache', model.config.get_text_config(decoder=True), CONSTANTS, 2, MAX_LEN, HEADS,
        HEAD_DIM)

prefill = dict(inputs, cache_position=torch.arange(44), attention_mask=slot_mask(mask2d, MAX_LEN))
with torch.no_grad():
    torch.export.export(wrapper(), (), kwargs=prefill, strict=True)  # the prefill program
step = dict(input_ids=inputs["input_ids"][:, -1:], cache_position=torch.tensor([44]),
            attention_mask=slot_mask(mask2d, MAX_LEN))
with torch.no_grad():
    torch.export.export(wrapper(), (), kwargs=step, strict=True)  # the decode program
