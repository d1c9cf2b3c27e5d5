"""[torch.export] unsupported construct at transformers.models.kosmos2.modeling_kosmos2:Kosmos2TextTransformer.forward:
Kosmos2ForConditionalGeneration (export_static_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python unsupported-5719ca50.py
The suite saw: torch.export.export(strict=True): Unsupported: Data-dependent branching (at
transformers/models/kosmos2/modeling_kosmos2.py:1010)
Shared by 1 class(es), 3 cell(s) of 3 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import Kosmos2Config, Kosmos2ForConditionalGeneration, Kosmos2TextConfig, Kosmos2VisionConfig

CONFIG = Kosmos2Config(
    text_config=Kosmos2TextConfig(vocab_size=256, embed_dim=64, layers=2, ffn_dim=128, attention_heads=4),
    vision_config=Kosmos2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8))
CONSTANTS = {}
MAX_LEN = 82
HEADS = 4
HEAD_DIM = 16


def tiny_model():
    torch.manual_seed(0)
    return Kosmos2ForConditionalGeneration(CONFIG).eval()


# The inputs export_static_cache fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[1, 1, 1, 66, 10, 187, 194, 174, 153, 99, 85, 52, 6, 151, 56, 186, 77, 83, 16, 105, 69,
        173, 110, 178, 110, 125, 54, 174, 76, 10, 98, 20, 135, 137, 136, 140, 151, 25, 57, 90, 36, 124, 166, 69, 124,
        51, 170, 119, 38, 78, 141, 123, 103, 180, 10, 87, 119, 88, 89, 91, 199, 112, 98, 69, 43, 170, 89, 73, 54, 80,
        23, 121, 108, 164, 68, 44], [1, 1, 1, 144, 128, 75, 64, 118, 95, 16, 24, 38, 70, 81, 127, 93, 96, 73, 86, 55,
        20, 109, 52, 175, 23, 32, 80, 197, 56, 99, 38, 98, 133, 44, 112, 61, 135, 5, 120, 3, 46, 86, 46, 111, 32, 17,
        154, 136, 84, 143, 104, 75, 157, 122, 138, 181, 71, 133, 179, 82, 36, 120, 103, 148, 33, 90, 117, 65, 53, 119,
        195, 187, 160, 196, 38, 138]], dtype=torch.int64),
    'image_embeds_position_mask': torch.tensor([[False] * 8 + [True] * 64 + [False] * 4,
        [False] * 7 + [True] * 64 + [False] * 5], dtype=torch.bool),
    'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 73, [0, 0, 0] + [1] * 73], dtype=torch.int64),
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

prefill = dict(inputs, cache_position=torch.arange(76), attention_mask=slot_mask(mask2d, MAX_LEN))
with torch.no_grad():
    torch.export.export(wrapper(), (), kwargs=prefill, strict=True)  # the prefill program
