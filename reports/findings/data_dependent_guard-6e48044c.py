"""[torch.export] data-dependent guard at
transformers.models.qwen4_exp.modeling_qwen4_exp:Qwen4ExpVisionAttention.forward: Qwen4ExpForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, bfloat16). Run: python data_dependent_guard-6e48044c.py
The suite saw: torch.export.export(strict=True): UserError: Consider annotating your code using torch._check*().
Could not guard on data-dependent expression Eq(u12, 0) (unhinted: Eq(u12, 0)). (Size-like symbols: u12) (at ...
Shared by 1 class(es), 42 cell(s) of 42 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import Qwen4ExpConfig, Qwen4ExpForConditionalGeneration, Qwen4ExpTextConfig, Qwen4ExpVisionConfig

CONFIG = Qwen4ExpConfig(
    text_config=Qwen4ExpTextConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        rope_parameters={'rope_theta': 10000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]}, head_dim=16,
        linear_key_head_dim=16, linear_value_head_dim=16, moe_intermediate_size=128,
        shared_expert_intermediate_size=128, num_experts_per_tok=2, num_experts=4,
        layer_types=['linear_attention', 'indexed_attention'], ple_embed_dim=64, indexer_n_heads=4,
        indexer_kv_heads=1, indexer_head_dim=16, indexer_budget=8, indexer_compress_ratio=4),
    vision_config=Qwen4ExpVisionConfig(depth=2, hidden_size=64, intermediate_size=128, num_heads=4, patch_size=8,
        out_hidden_size=64),
    image_token_id=254, video_token_id=255, vision_start_token_id=252, vision_end_token_id=253)
DTYPE = torch.bfloat16
CONSTANTS = {}
MAX_LEN = 24
HEADS = 2
HEAD_DIM = 16


def tiny_model():
    torch.manual_seed(0)
    return Qwen4ExpForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs export_static_cache fed: token ids literal; pixel_values seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    inputs = {
        'input_ids': torch.tensor([[0, 0, 0, 154, 175, 161, 48, 73, 252] + [254] * 4 + [253, 132, 54, 43, 99], [0, 0, 0,
            13, 185, 190, 125, 252] + [254] * 4 + [253, 81, 143, 70, 68, 177]], dtype=torch.int64),
        'pixel_values': torch.randn((32, 384), generator=g, dtype=torch.float32),
        'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
        'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


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


inputs = sample_inputs()
mask2d = inputs.pop("attention_mask", None)
mask2d = torch.ones_like(inputs["input_ids"]) if mask2d is None else mask2d

def wrapper():
    model = tiny_model()
    return StaticCacheModule(model, 'cache', model.config.get_text_config(decoder=True), CONSTANTS, 2, MAX_LEN, HEADS,
        HEAD_DIM)

prefill = dict(inputs, cache_position=torch.arange(18), attention_mask=slot_mask(mask2d, MAX_LEN))
with torch.no_grad():
    torch.export.export(wrapper(), (), kwargs=prefill, strict=True)  # the prefill program
