"""[torch.export] unsupported construct at
transformers.models.moshi.modeling_moshi:MoshiForConditionalGeneration.forward: MoshiForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python unsupported-905868a1.py
The suite saw: decode program: torch.export.export(strict=True): Unsupported: TypeError when making fake tensor call
(at transformers/models/moshi/modeling_moshi.py:1001)
Shared by 1 class(es), 3 cell(s) of 3 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import MimiConfig, MoshiConfig, MoshiDepthConfig, MoshiForConditionalGeneration

CONFIG = MoshiConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=4, audio_vocab_size=64, head_dim=16, ffn_dim=128,
    audio_encoder_config=MimiConfig(hidden_size=64, num_filters=4, codebook_size=64, codebook_dim=64,
        vector_quantization_hidden_dimension=64, upsample_groups=64, num_hidden_layers=2, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16),
    depth_decoder_config=MoshiDepthConfig(vocab_size=256, hidden_size=64, input_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, audio_vocab_size=64, head_dim=16, ffn_dim=128))
CONSTANTS = {}
MAX_LEN = 15
HEADS = 4
HEAD_DIM = 16


def tiny_model():
    torch.manual_seed(0)
    return MoshiForConditionalGeneration(CONFIG).eval()


# The inputs export_static_cache fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 28, 28, 107, 145, 199, 139], [60, 16, 194, 167, 192, 21, 137, 100, 140]],
        dtype=torch.int64),
    'moshi_audio_codes': torch.tensor([[[44, 47, 53, 0, 3, 59, 3, 39, 9], [19, 21, 50, 36, 23, 6, 24, 24, 12], [58, 1,
        38, 39, 23, 46, 24, 17, 37], [25, 13, 8, 9, 20, 51, 16, 51, 5], [62, 15, 47, 0, 18, 35, 24, 49, 51], [29, 19,
        19, 14, 39, 32, 1, 9, 57], [63, 32, 31, 10, 52, 23, 35, 62, 11], [50, 55, 28, 34, 0, 0, 36, 53, 5]], [[38, 40,
        52, 17, 15, 4, 41, 42, 58], [31, 56, 1, 1, 39, 41, 57, 35, 38], [55, 11, 46, 18, 27, 0, 14, 35, 53], [12, 57,
        42, 20, 11, 4, 6, 4, 47], [63, 52, 3, 12, 36, 52, 40, 14, 15], [20, 35, 58, 23, 15, 13, 53, 21, 48], [49, 5, 41,
        35, 0, 31, 5, 30, 0], [49, 50, 36, 34, 48, 29, 3, 34, 42]]], dtype=torch.int64),
    'user_audio_codes': torch.tensor([[[13, 48, 39, 21, 9, 63, 0, 10, 50], [43, 58, 63, 23, 59, 2, 57, 34, 62], [35, 30,
        59, 3, 18, 46, 35, 20, 17], [50, 27, 14, 41, 58, 1, 36, 10, 22], [43, 40, 11, 2, 51, 16, 32, 54, 0], [38, 19,
        46, 42, 51, 56, 60, 40, 13], [30, 24, 61, 2, 3, 30, 34, 43, 13], [48, 40, 8, 19, 31, 8, 26, 2, 56]], [[52, 3,
        44, 61, 14, 32, 4, 3, 45], [11, 60, 22, 13, 57, 45, 11, 56, 16], [24, 29, 21, 46, 25, 16, 60, 57, 54], [53, 61,
        19, 33, 40, 32, 36, 59, 59], [57, 6, 21, 31, 13, 7, 56, 24, 15], [41, 18, 40, 54, 15, 11, 38, 47, 29], [57, 1,
        31, 54, 44, 24, 61, 24, 3], [18, 47, 3, 42, 12, 38, 35, 22, 62]]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
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

prefill = dict(inputs, cache_position=torch.arange(9), attention_mask=slot_mask(mask2d, MAX_LEN))
with torch.no_grad():
    torch.export.export(wrapper(), (), kwargs=prefill, strict=True)  # the prefill program
step = dict(input_ids=inputs["input_ids"][:, -1:], cache_position=torch.tensor([9]),
            attention_mask=slot_mask(mask2d, MAX_LEN))
with torch.no_grad():
    torch.export.export(wrapper(), (), kwargs=step, strict=True)  # the decode program
