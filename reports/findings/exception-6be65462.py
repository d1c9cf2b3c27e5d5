"""[legacy cache] raises at
transformers.models.switch_transformers.modeling_switch_transformers:SwitchTransformersStack.forward:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-6be65462.py
The suite saw: ValueError: `use_cache` can only be set to `True` if SwitchTransformersStack( (embed_tokens):
Embedding(256, 64) (block): ModuleList( (0): SwitchTransformersBlock( (layer): ModuleList( (0): ...
Shared by 1 class(es), 3 cell(s) of 3 check(s) (index.json lists them).
"""

import torch
from transformers import SwitchTransformersConfig, SwitchTransformersForConditionalGeneration

CONFIG = SwitchTransformersConfig(vocab_size=256, d_model=64, d_ff=128, num_layers=2, num_sparse_encoder_layers=2,
    num_decoder_layers=2, num_sparse_decoder_layers=2, num_heads=4, num_experts=4, encoder_sparse_step=4,
    decoder_sparse_step=1, decoder_start_token_id=0)
IDS = 'decoder_input_ids'
CACHE = 'cache'
DECODE_STEPS = 2


def tiny_model():
    torch.manual_seed(0)
    return SwitchTransformersForConditionalGeneration(CONFIG).eval()


def sample_inputs():
    """The inputs legacy_cache fed: token ids literal."""
    return {
        'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
        'decoder_input_ids': torch.tensor([[0, 123, 191], [0, 116, 17]], dtype=torch.int64),
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
    for name in ("cache", "past_key_values"):
        value = output.get(name) if isinstance(output, dict) else getattr(output, name, None)
        if value is not None:
            return value
    return None


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
    logits = []
    for step in range(DECODE_STEPS):
        token = prefill[IDS][:, prefill[IDS].shape[1] - 1 - step:prefill[IDS].shape[1] - step]
        inputs = {k: v for k, v in prefill.items() if k not in (IDS, 'decoder_attention_mask')}
        inputs[IDS] = token
        inputs[CACHE] = cache
        inputs['use_cache'] = True
        with torch.no_grad():
            output = owner(**inputs)
        logits.append(logits_of(output).detach().clone())
        cache = cache_of(output)
    return logits

prefill = sample_inputs()
owner = tiny_model()  # the module whose forward takes the cache
with torch.no_grad():
    output = owner(**prefill, use_cache=True)
cache = cache_of(output)
legacy = to_legacy(cache)
converted = from_legacy(cache, legacy)
decode(owner, prefill, output, converted)  # from the converted cache
decode(owner, prefill, output, cache)  # from the model's own cache
