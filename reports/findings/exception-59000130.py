"""[legacy cache] raises at transformers.utils.deprecation:deprecate_kwarg.<locals>.wrapper.<locals>.wrapped_func:
PI0ForConditionalGeneration (legacy_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, bfloat16). Run: python exception-59000130.py
The suite saw: TypeError: PI0ForConditionalGeneration.forward() missing 1 required positional argument: 'state' (at
transformers/utils/deprecation.py:173)
Shared by 1 class(es), 3 cell(s) of 3 check(s) (index.json lists them).
"""

import torch
from transformers import GemmaConfig, PI0Config, PI0ForConditionalGeneration, PaliGemmaConfig, SiglipVisionConfig

CONFIG = PI0Config(
    vlm_config=PaliGemmaConfig(
        vision_config=SiglipVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, image_size=32, patch_size=8, vision_use_head=False, vocab_size=256,
            projection_dim=64),
        text_config=GemmaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=1, head_dim=16, use_bidirectional_attention=True,
            num_image_tokens=16),
        image_token_index=255, vocab_size=256, projection_dim=64, hidden_size=64),
    dit_config=GemmaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=1, head_dim=16, use_bidirectional_attention=True, is_causal=True))
DTYPE = torch.bfloat16
IDS = 'input_ids'
CACHE = 'cache'
DECODE_STEPS = 2


def tiny_model():
    torch.manual_seed(0)
    return PI0ForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs legacy_cache fed: token ids literal; pixel_values, noise seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    inputs = {
        'input_ids': torch.tensor([[0, 0, 0, 29, 146, 173, 27, 176] + [255] * 16 + [14, 154, 191, 64], [0, 0, 0, 53,
            177, 172, 115] + [255] * 16 + [155, 43, 49, 166, 89]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 25, [0, 0, 0] + [1] * 25], dtype=torch.int64),
        'pixel_values': torch.randn((2, 1, 3, 32, 32), generator=g, dtype=torch.float32),
        'pixel_attention_mask': torch.full((2, 1), True, dtype=torch.bool),
        'state': torch.tensor([[0.8538718819618225, 0.8351276516914368, 0.7582133412361145, -1.5303689241409302,
            -0.4473475217819214, 0.2807408571243286, -0.12731705605983734, 1.1881386041641235, 0.08767516165971756,
            1.5282564163208008, -1.448522686958313, 0.8038290143013, -0.8713321089744568, 0.2224467694759369,
            -0.069220170378685, -0.3815804123878479, -1.3045508861541748, 1.3294090032577515, -0.3300064504146576,
            -0.545979380607605, 0.8411675095558167, -0.1280260980129242, -0.3491677939891815, -0.07314260303974152,
            -0.2928176522254944, 0.08410710841417313, -0.5622379779815674, -0.0029187838081270456, 1.5581729412078857,
            0.3019449710845947, 1.070264458656311, 0.45160147547721863], [0.5312950611114502, 0.7266605496406555,
            -0.6187140941619873, 0.30459699034690857, -0.2738043963909149, -0.5394694209098816, -0.42674458026885986,
            1.194504737854004, 0.8116320967674255, 1.1249611377716064, 0.3074210584163666, 1.3693877458572388,
            0.330515593290329, 2.6040329933166504, 0.5147572159767151, 1.0329558849334717, 2.1097915172576904,
            -1.1579978466033936, 0.7347648739814758, 1.757173776626587, -0.6136267781257629, -0.25366532802581787,
            -1.4018948078155518, 0.7131887078285217, -2.0824015140533447, 1.30597984790802, 0.4852987825870514,
            -0.942952573299408, -0.5223046541213989, -0.3573267161846161, 0.43954187631607056, 0.5349658727645874]],
            dtype=torch.float32),
        'noise': torch.randn((2, 50, 32), generator=g, dtype=torch.float32),
        'timestep': torch.tensor([0.30000001192092896, 0.699999988079071], dtype=torch.float32),
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
    logits = []
    for step in range(DECODE_STEPS):
        token = prefill[IDS][:, prefill[IDS].shape[1] - 1 - step:prefill[IDS].shape[1] - step]
        inputs = {IDS: token}
        if 'attention_mask' in prefill:
            mask = prefill['attention_mask']
            inputs['attention_mask'] = torch.cat([mask, mask.new_ones((mask.shape[0], step + 1))], dim=1)
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
