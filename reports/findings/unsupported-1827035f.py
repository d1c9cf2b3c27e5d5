"""[torch.export] unsupported construct at transformers.utils.output_capturing:maybe_install_capturing_hooks:
Molmo2ForConditionalGeneration (export_static_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python unsupported-1827035f.py
The suite saw: torch.export.export(strict=True): Unsupported: Unsupported context manager (at
transformers/utils/output_capturing.py:239)
Shared by 13 class(es), 78 cell(s) of 6 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import (Molmo2AdapterConfig, Molmo2Config, Molmo2ForConditionalGeneration, Molmo2TextConfig,
    Molmo2VisionConfig)

CONFIG = Molmo2Config(
    vision_config=Molmo2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16, image_size=[32, 32], patch_size=8,
        num_position_embeddings=16),
    adapter_config=Molmo2AdapterConfig(vision_feature_layer=[1, 0], hidden_size=64, num_attention_heads=4,
        num_key_value_heads=4, head_dim=16, intermediate_size=128, text_hidden_size=64),
    text_config=Molmo2TextConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        vocab_size=256, num_hidden_layers=2, intermediate_size=128, rope_scaling_layers=[0, 1]),
    image_start_token_id=250, low_res_image_start_token_id=253, image_end_token_id=251, image_patch_id=252,
    frame_start_token_id=254, frame_end_token_id=255)
CONSTANTS = {}
MAX_LEN = 24
HEADS = 2
HEAD_DIM = 16


def tiny_model():
    torch.manual_seed(0)
    return Molmo2ForConditionalGeneration(CONFIG).eval()


# The inputs export_static_cache fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174, 250] + [252] * 4 + [251, 108, 164, 68, 44], [0, 0, 0,
        153, 99, 85, 52, 250] + [252] * 4 + [251, 6, 151, 56, 186, 77]], dtype=torch.int64),
    'pixel_values': torch.randn((2, 16, 192), generator=g, dtype=torch.float32),
    'image_token_pooling': torch.tensor([[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15], [16, 17, 20, 21],
        [18, 19, 22, 23], [24, 25, 28, 29], [26, 27, 30, 31]], dtype=torch.int64),
    'image_grids': torch.tensor([[2, 2, 0, 0], [2, 2, 0, 0]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
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

prefill = dict(inputs, cache_position=torch.arange(18), attention_mask=slot_mask(mask2d, MAX_LEN))
with torch.no_grad():
    torch.export.export(wrapper(), (), kwargs=prefill, strict=True)  # the prefill program
