"""[torch.compile] graph break under fullgraph at
transformers.models.glm_image.modeling_glm_image:GlmImageModel.compute_3d_position_ids:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python graph_break-66d463f3.py
The suite saw: generate with a StaticCache and compiled decode failed: Unsupported: Data-dependent branching:
Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). Dynamo does not support tracing dynamic co ...
Shared by 1 class(es), 6 cell(s) of 6 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import (GlmImageConfig, GlmImageForConditionalGeneration, GlmImageTextConfig, GlmImageVQVAEConfig,
    GlmImageVisionConfig)
from transformers.generation.configuration_utils import CompileConfig

CONFIG = GlmImageConfig(
    text_config=GlmImageTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4,
        rope_parameters={'rope_theta': 10000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]},
        pad_token_id=254, vision_vocab_size=192, eos_token_id=65),
    vision_config=GlmImageVisionConfig(depth=2, hidden_size=64, num_heads=4, image_size=32, patch_size=8,
        intermediate_size=128),
    vq_config=GlmImageVQVAEConfig(embed_dim=64, num_embeddings=64, latent_channels=64), image_token_id=255,
    image_start_token_id=64, image_end_token_id=65)
BACKEND = 'inductor'
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return GlmImageForConditionalGeneration(CONFIG).eval()


# The inputs compile_decode fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[254, 254, 254, 52, 67, 26, 174, 67, 64] + [255] * 16 + [65, 26, 44, 97, 33, 64], [254,
        254, 254, 9, 88, 191, 84, 64] + [255] * 16 + [65, 109, 119, 108, 79, 194, 64]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 28, [0, 0, 0] + [1] * 28], dtype=torch.int64),
    'pixel_values': torch.randn((32, 192), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4]] * 4, dtype=torch.int64),
    'images_per_sample': torch.full((2,), 2, dtype=torch.int64),
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
cache = static_cache(model.config.get_text_config(decoder=True), 31 + NEW_TOKENS,
    2)  # what generate makes for a static cache
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
with torch.no_grad():
    model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                   disable_compile=False, cache=cache, compile_config=config)
