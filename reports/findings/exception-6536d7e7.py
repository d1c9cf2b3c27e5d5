"""[torch.compile] raises at transformers.masking_utils:_preprocess_mask_arguments:
PaliGemmaForConditionalGeneration:paligemma2 (compile_decode).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-6536d7e7.py
The suite saw: generate with a StaticCache and compiled decode failed: AttributeError: 'dict' object has no
attribute 'ndim' (at transformers/masking_utils.py:834)
Shared by 1 class(es), 9 cell(s) of 9 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import Gemma2Config, PaliGemmaConfig, PaliGemmaForConditionalGeneration, SiglipVisionConfig
from transformers.generation.configuration_utils import CompileConfig

CONFIG = PaliGemmaConfig(
    vision_config=SiglipVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vision_use_head=False, vocab_size=256,
        projection_dim=64),
    text_config=Gemma2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        layer_types=['sliding_attention', 'full_attention'], use_bidirectional_attention=True,
        cache_implementation='hybrid', num_image_tokens=16),
    image_token_index=255, vocab_size=256, projection_dim=64, hidden_size=64)
BACKEND = 'eager'
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return PaliGemmaForConditionalGeneration(CONFIG).eval()


# The inputs compile_decode fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 3, 4, 5, 6, 7] + [255] * 16 + [2, 8, 9, 10, 11], list(range(12,
        18)) + [255] * 16 + [2, 18, 19, 20, 21, 22]], dtype=torch.int64),
    'token_type_ids': torch.full((2, 28), 0, dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0] + [1] * 26, [1] * 28], dtype=torch.int64),
    'pixel_values': (torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32) * 0.583 + 0.00223),
}

def static_cache(config, max_len, batch_size):
    """The StaticCache generate makes for cache_implementation="static" (the decoder's text config)."""
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kwargs = {"config": config, "max_cache_len": max_len}
    for name in ("max_batch_size", "batch_size"):
        if name in params:
            kwargs[name] = batch_size
    return StaticCache(**kwargs)


model = tiny_model()
cache = static_cache(model.config.get_text_config(decoder=True), 28 + NEW_TOKENS,
    2)  # what generate makes for a static cache
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
with torch.no_grad():
    model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                   disable_compile=False, cache=cache, compile_config=config)
