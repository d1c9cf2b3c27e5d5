"""[torch.export] export fails at transformers.cache_utils:Cache.get_conv_state: InklingForConditionalGeneration
(export_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, bfloat16). Run: python export_error-cc50269c.py
The suite saw: export of part 'prefill' with attention_mask, inputs_embeds dynamic failed: ValueError: Cannot get
conv state for non linear attention layer 0 of type StaticLayer. (at transformers/cache_utils.py:1632)
Shared by 3 class(es), 15 cell(s) of 5 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import (InklingAudioConfig, InklingConfig, InklingForConditionalGeneration, InklingTextConfig,
    InklingVisionConfig)

CONFIG = InklingConfig(
    text_config=InklingTextConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=16,
        layer_types=['hybrid_sliding', 'hybrid'], mlp_layer_types=['sparse', 'sparse'], intermediate_size=128,
        moe_intermediate_size=128, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1),
    audio_config=InklingAudioConfig(text_hidden_size=64),
    vision_config=InklingVisionConfig(text_hidden_size=64, patch_size=8, hidden_size=64, n_layers=2,
        num_attention_heads=4),
    image_token_id=255, audio_token_id=254, image_bos_token_id=252, audio_bos_token_id=253)
DTYPE = torch.bfloat16
MAX_LEN = 18


def tiny_model():
    torch.manual_seed(0)
    return InklingForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs export_generate fed: token ids literal; pixel_values seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    inputs = {
        'input_ids': torch.tensor([[58, 141, 194, 46, 255, 144, 136, 11, 187, 180]], dtype=torch.int64),
        'attention_mask': torch.full((1, 10), 1, dtype=torch.int64),
        'pixel_values': torch.randn((1, 2, 8, 8, 3), generator=g, dtype=torch.float32),
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


class EmbedPart(torch.nn.Module):
    """The text embedding."""

    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, input_ids):
        return self.embedding(input_ids)


class DecoderPart(torch.nn.Module):
    """The decoder and its head over `inputs_embeds` and a StaticCache of `max_len` tokens (batch 1): without
    `cache_tensors` (the prefill) a fresh cache, returning the last logits and the cache tensors (keys, values,
    length per layer); with them (a step) they back the cache, updated in place; returns the last logits."""

    def __init__(self, owner, max_len, cache_kwarg, text_config):
        super().__init__()
        self.owner, self.max_len, self.cache_kwarg, self.text_config = owner, max_len, cache_kwarg, text_config

    def forward(self, inputs_embeds, cache_tensors=None, **text):
        cache = full_static_layers(static_cache(self.text_config, self.max_len, 1), self.max_len)
        layers = [layer for layer in cache.layers if hasattr(layer, "lazy_initialization")]
        if cache_tensors is not None:
            for layer, i in zip(layers, range(0, len(cache_tensors), 3)):
                keys, values, length = cache_tensors[i:i + 3]
                layer.keys, layer.values, layer.cumulative_length = keys, values, length
                layer.device = keys.device
                layer.batch_size, layer.num_heads = keys.shape[:2]
                layer.k_head_dim, layer.v_head_dim = keys.shape[-1], values.shape[-1]
                layer.is_initialized = True
        else:
            for layer in layers:
                layer.cumulative_length = inputs_embeds.new_zeros((), dtype=torch.long)
        output = self.owner(inputs_embeds=inputs_embeds, use_cache=True, **{self.cache_kwarg: cache}, **text)
        logits = logits_of(output)[:, -1, :]
        if cache_tensors is not None:
            return logits
        return (logits, *[t for layer in layers for t in (layer.keys, layer.values, layer.cumulative_length)])


def export_part(module, args=(), kwargs=None):
    """torch.export.export(strict=False) of one generation part."""
    with torch.no_grad():
        return torch.export.export(module, args, kwargs or {}, strict=False)


inputs = sample_inputs()  # batch 1: the sample's second prompt, its padding removed
model = tiny_model()
owner = model  # the module generate decodes with
placeholders = inputs["input_ids"] == 255
ids = inputs["input_ids"].masked_fill(placeholders, 0)
text = {k: inputs[k] for k in ['attention_mask']}
embedding = EmbedPart(owner.get_input_embeddings())
decoder = DecoderPart(owner, MAX_LEN, 'cache', owner.config.get_text_config(decoder=True))
with torch.no_grad():
    embeds = embedding(ids)
export_part(decoder, (embeds,), dict(text))
