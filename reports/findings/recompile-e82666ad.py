"""[torch.compile] recompiles every decode step at kwargs['cache'].layers[#].cumulative_length_int == # @
transformers.cache_utils:StaticSlidingWindowLayer.update: AyaVisionForConditionalGeneration (compile_decode).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, bfloat16). Run: python recompile-e82666ad.py
The suite saw: decode step recompiled after the first step; failed guard:
kwargs['cache'].layers[0].cumulative_length_int == 18 (at transformers/cache_utils.py:566 in update)
Shared by 11 class(es), 66 cell(s) of 6 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import AyaVisionConfig, AyaVisionForConditionalGeneration, Cohere2Config, SiglipVisionConfig
from torch._dynamo.utils import counters, guard_failures
from transformers import LogitsProcessorList
from transformers.generation.configuration_utils import CompileConfig

CONFIG = AyaVisionConfig(
    vision_config=SiglipVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vision_use_head=False),
    text_config=Cohere2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, eos_token_id=254,
        layer_types=['sliding_attention', 'full_attention'], head_dim=16),
    image_token_index=255)
DTYPE = torch.bfloat16
BACKEND = 'eager'
NEW_TOKENS = 5


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = AyaVisionForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs compile_decode fed: token ids literal; pixel_values seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    inputs = {
        'input_ids': torch.tensor([[0, 0, 1, 2, 3, 4, 6, 252, 248] + [255] * 4 + [251, 7, 8, 9, 10], list(range(11,
            17)) + [252, 248] + [255] * 4 + [251, 17, 18, 19, 20, 21]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0] + [1] * 16, [1] * 18], dtype=torch.int64),
        'pixel_values': (torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32) * 1.09 + 0.192),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


def static_cache(config, max_len, batch_size):
    """The StaticCache generate makes for cache_implementation="static" (the decoder's text config)."""
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kwargs = {"config": config, "max_cache_len": max_len}
    for name in ("max_batch_size", "batch_size"):
        if name in params:
            kwargs[name] = batch_size
    return StaticCache(**kwargs)


class ForceTokens:
    """A logits processor: greedy decoding that follows the given tokens (the eager run's)."""

    def __init__(self, tokens):
        self.tokens, self.step = tokens, 0

    def __call__(self, input_ids, scores):
        forced = torch.full_like(scores, float("-inf"))
        forced.scatter_(1, self.tokens[:, self.step:self.step + 1], 0.0)
        self.step += 1
        return forced


def greedy(model, inputs, new_tokens, **extra):
    """Greedy generate of exactly `new_tokens` tokens (EOS cannot stop it), generate's auto-compile off."""
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, disable_compile=True, **extra)


inputs = sample_inputs()
eager = greedy(tiny_model(), inputs, NEW_TOKENS, output_logits=True, return_dict_in_generate=True)
model = tiny_model()
cache = static_cache(model.config.get_text_config(decoder=True), 18 + NEW_TOKENS,
    2)  # what generate makes for a static cache
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
torch._dynamo.reset()
counters.clear()
with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=NEW_TOKENS + 1):  # count each recompile
    compiled = model.generate(
        **inputs, do_sample=False, num_beams=1, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
        disable_compile=False, cache=cache, compile_config=config, output_logits=True,
        return_dict_in_generate=True,
        logits_processor=LogitsProcessorList([ForceTokens(eager.sequences[:,
            -NEW_TOKENS:])]))  # forced onto the eager tokens
breaks = list(counters["graph_break"])
if breaks:
    raise AssertionError(f"the compiled decode step has {len(breaks)} graph break(s), first: "
                                 f"{breaks[0]}")
if not counters["stats"]["unique_graphs"]:
    raise AssertionError("generate did not compile the decode step (its cache is not a "
                  "compileable static cache, or the model's generate bypasses compilation)")
failed = [str(reason) for reasons in guard_failures.values() for reason in reasons]
if failed:
    raise AssertionError("decode step recompiled after the first step; failed guard: " + failed[0])
