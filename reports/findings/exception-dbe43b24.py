"""[legacy cache] raises at transformers.models.kosmos2.modeling_kosmos2:Kosmos2ForConditionalGeneration.forward:
Kosmos2ForConditionalGeneration (legacy_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-dbe43b24.py
The suite saw: ValueError: You have to specify either `pixel_values` or `image_embeds`. (at
transformers/models/kosmos2/modeling_kosmos2.py:1612)
Shared by 1 class(es), 3 cell(s) of 3 check(s) (index.json lists them).
"""

import torch
from transformers import Kosmos2Config, Kosmos2ForConditionalGeneration, Kosmos2TextConfig, Kosmos2VisionConfig

CONFIG = Kosmos2Config(
    text_config=Kosmos2TextConfig(vocab_size=256, embed_dim=64, layers=2, ffn_dim=128, attention_heads=4),
    vision_config=Kosmos2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8))
IDS = 'input_ids'
CACHE = 'cache'
DECODE_STEPS = 2
EXTRA = {'next_sequence_length': 1, 'is_first_iteration': False}


def tiny_model():
    torch.manual_seed(0)
    return Kosmos2ForConditionalGeneration(CONFIG).eval()


def sample_inputs():
    """The inputs legacy_cache fed: token ids literal; pixel_values seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    return {
        'input_ids': torch.tensor([[1, 1, 1, 66, 10, 187, 194, 174, 153, 99, 85, 52, 6, 151, 56, 186, 77, 83, 16, 105,
            69, 173, 110, 178, 110, 125, 54, 174, 76, 10, 98, 20, 135, 137, 136, 140, 151, 25, 57, 90, 36, 124, 166, 69,
            124, 51, 170, 119, 38, 78, 141, 123, 103, 180, 10, 87, 119, 88, 89, 91, 199, 112, 98, 69, 43, 170, 89, 73,
            54, 80, 23, 121, 108, 164, 68, 44], [1, 1, 1, 144, 128, 75, 64, 118, 95, 16, 24, 38, 70, 81, 127, 93, 96,
            73, 86, 55, 20, 109, 52, 175, 23, 32, 80, 197, 56, 99, 38, 98, 133, 44, 112, 61, 135, 5, 120, 3, 46, 86, 46,
            111, 32, 17, 154, 136, 84, 143, 104, 75, 157, 122, 138, 181, 71, 133, 179, 82, 36, 120, 103, 148, 33, 90,
            117, 65, 53, 119, 195, 187, 160, 196, 38, 138]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 73, [0, 0, 0] + [1] * 73], dtype=torch.int64),
        'image_embeds_position_mask': torch.tensor([[False] * 8 + [True] * 64 + [False] * 4,
            [False] * 7 + [True] * 64 + [False] * 5], dtype=torch.bool),
        'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
        'position_ids': torch.tensor([[0] * 4 + list(range(1, 73)), [0] * 4 + list(range(1, 73))], dtype=torch.int64),
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
