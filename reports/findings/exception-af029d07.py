"""[torch.compile] raises at transformers.cache_utils:StaticLayer.update: BlipForConditionalGeneration
(compile_decode).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python exception-af029d07.py
The suite saw: generate with a StaticCache and compiled decode failed: IndexError: index_copy_(): index 13 is out of
bounds for dimension 2 with size 13 (at transformers/cache_utils.py:487)
Shared by 1 class(es), 9 cell(s) of 9 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import BlipConfig, BlipForConditionalGeneration, BlipTextConfig, BlipVisionConfig
from transformers.generation.configuration_utils import CompileConfig

CONFIG = BlipConfig(
    text_config=BlipTextConfig(vocab_size=256, hidden_size=64, encoder_hidden_size=64, intermediate_size=128,
        projection_dim=64, num_hidden_layers=2, num_attention_heads=4, bos_token_id=255, sep_token_id=254),
    vision_config=BlipVisionConfig(hidden_size=64, intermediate_size=128, projection_dim=64, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, initializer_range=0.02),
    projection_dim=64, image_text_hidden_size=64)
DTYPE = torch.float16
BACKEND = 'eager'
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return BlipForConditionalGeneration(CONFIG).to(DTYPE).eval()


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
        'input_ids': torch.tensor([[255, 0, 0, 118, 193, 119, 64, 61, 24], [255, 107, 92, 39, 189, 180, 10, 29, 23]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
        'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
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


inputs = sample_inputs()
model = tiny_model()
cache = static_cache(model.text_decoder.config.get_text_config(decoder=True), 8 + NEW_TOKENS,
    2)  # what generate makes for a static cache
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
with torch.no_grad():
    model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                   disable_compile=False, cache=cache, compile_config=config)
