"""[legacy cache] raises at transformers.cache_utils:Cache.get_conv_state: Inkling2LoopForConditionalGeneration
(legacy_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-48ac7646.py
The suite saw: ValueError: Cannot get conv state for non linear attention layer 0 of type DynamicLayer. (at
transformers/cache_utils.py:1632)
Shared by 3 class(es), 8 cell(s) of 4 check(s) (index.json lists them).
"""

import torch
from transformers import (Inkling2LoopConfig, Inkling2LoopForConditionalGeneration, Inkling2LoopTextConfig,
    Inkling2VisionConfig)

CONFIG = Inkling2LoopConfig(
    text_config=Inkling2LoopTextConfig(vocab_size=256, unpadded_vocab_size=256, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, swa_num_attention_heads=4,
        swa_num_key_value_heads=2, swa_head_dim=16, layer_types=['hybrid_sliding', 'hybrid'],
        moe_intermediate_size=128, n_routed_experts=4, num_experts_per_tok=2, eos_token_id=254),
    vision_config=Inkling2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, patch_size=8, projection_hidden_dim=256, text_hidden_size=64),
    image_token_id=255)
IDS = 'input_ids'
CACHE = 'cache'
DECODE_STEPS = 2
EXTRA = {'next_sequence_length': 1, 'is_first_iteration': False}


def tiny_model():
    torch.manual_seed(0)
    return Inkling2LoopForConditionalGeneration(CONFIG).eval()


def sample_inputs():
    """The inputs legacy_cache fed: token ids literal; pixel_values seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    return {
        'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174] + [255] * 4 + [108, 164, 68, 44], [0, 0, 0, 153, 99,
            85, 52] + [255] * 4 + [6, 151, 56, 186, 77]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 13, [0, 0, 0] + [1] * 13], dtype=torch.int64),
        'pixel_values': torch.randn((8, 16, 16, 3), generator=g, dtype=torch.float32),
        'image_grid_thw': torch.tensor([[1, 2, 2], [1, 2, 2]], dtype=torch.int64),
        'position_ids': torch.tensor([[0] * 4 + list(range(1, 13)), [0] * 4 + list(range(1, 13))], dtype=torch.int64),
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


def cache_of(output):
    """The cache a forward returned (`cache` in newer 5.x, `past_key_values` before)."""
    get = output.get if isinstance(output, dict) else lambda name: getattr(output, name, None)
    return next((get(name) for name in ("cache", "past_key_values") if get(name) is not None), None)


def to_legacy(cache):
    """The legacy tuples of a cache, cloned: per layer (key, value), or (key, value, cross key, cross value)."""
    def pairs(c):
        return tuple((getattr(layer, "keys", None), getattr(layer, "values", None)) for layer in c.layers)

    if hasattr(cache, "to_legacy_cache"):
        legacy = cache.to_legacy_cache()
    elif hasattr(cache, "self_attention_cache"):
        legacy = tuple(a + b for a, b in zip(pairs(cache.self_attention_cache), pairs(cache.cross_attention_cache)))
    else:
        legacy = pairs(cache)
    return tuple(tuple(t.detach().clone() if isinstance(t, torch.Tensor) else t for t in layer) for layer in legacy)


def from_legacy(cache, legacy):
    """The installed API's conversion back: `from_legacy_cache` where it exists, else the constructor."""
    from transformers.cache_utils import DynamicCache

    kind = type(cache) if hasattr(cache, "self_attention_cache") else DynamicCache
    return kind.from_legacy_cache(legacy) if hasattr(kind, "from_legacy_cache") else kind(legacy)


def decode(owner, prefill, output, cache):
    """DECODE_STEPS steps after the prefill, feeding the last prompt tokens back, with the inputs
    generate passes (its own prepare_inputs_for_generation where the model has one)."""
    ids, state, logits = prefill[IDS], None, []
    for step in range(DECODE_STEPS):
        token = prefill[IDS][:, prefill[IDS].shape[1] - 1 - step:prefill[IDS].shape[1] - step]
        if state is None:
            state = {k: v for k, v in prefill.items() if k != IDS}
            state = owner._update_model_kwargs_for_generation(output, state, is_encoder_decoder=False)
        ids = torch.cat([ids, token], dim=1)
        kwargs = {k: v for k, v in state.items() if k not in ('cache', 'past_key_values')}
        inputs = dict(owner.prepare_inputs_for_generation(ids, **kwargs, **{CACHE: cache},
                                                          use_cache=True, **EXTRA))
        inputs[CACHE] = cache
        inputs['use_cache'] = True
        with torch.no_grad():
            output = owner(**inputs)
        logits.append(logits_of(output).detach().clone())
        cache = cache_of(output)
        state = owner._update_model_kwargs_for_generation(output, dict(state), is_encoder_decoder=False)
    return logits

prefill = sample_inputs()
owner = tiny_model()  # the module whose forward takes the cache
with torch.no_grad():
    output = owner(**prefill, use_cache=True)
cache = cache_of(output)
legacy = to_legacy(cache)
converted = from_legacy(cache, legacy)
decode(owner, prefill, output, converted)  # from the converted cache
