"""[torch.compile] raises at transformers.models.kosmos2_5.modeling_kosmos2_5:Kosmos2_5TextTransformer.forward:
Kosmos2_5ForConditionalGeneration (compile_decode).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-712a2e4d.py
The suite saw: IndexError: The shape of the mask [2, 28] at index 1 does not match the shape of the indexed tensor
[2, 32, 64] at index 1 (at transformers/models/kosmos2_5/modeling_kosmos2_5.py:920)
Shared by 1 class(es), 9 cell(s) of 9 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import (Kosmos2_5Config, Kosmos2_5ForConditionalGeneration, Kosmos2_5TextConfig,
    Kosmos2_5VisionConfig)
from transformers.generation.configuration_utils import CompileConfig

CONFIG = Kosmos2_5Config(
    text_config=Kosmos2_5TextConfig(vocab_size=256, embed_dim=64, layers=2, ffn_dim=128, attention_heads=4),
    vision_config=Kosmos2_5VisionConfig(hidden_size=64, intermediate_size=128, head_dim=16, num_hidden_layers=2,
        num_attention_heads=4),
    latent_query_num=16)
BACKEND = 'eager'
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return Kosmos2_5ForConditionalGeneration(CONFIG).eval()


# The inputs compile_decode fed: token ids literal; flattened_patches (after its first 2 column(s), which are exact)
# seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'flattened_patches': torch.cat([torch.tensor([[[1.0, 1.0], [1.0, 2.0], [2.0, 1.0], [2.0, 2.0], [0.0, 0.0], [0.0,
        0.0]], [[1.0, 1.0], [1.0, 2.0], [1.0, 3.0], [2.0, 1.0], [2.0, 2.0], [2.0, 3.0]]], dtype=torch.float32),
        torch.randn((2, 6, 768), generator=g, dtype=torch.float32)], dim=-1),
    'input_ids': torch.tensor([[1, 1, 1, 143, 91, 62, 180, 189, 174, 131, 83, 167, 12, 154, 169, 90, 43, 163, 150, 86,
        46, 160, 10, 55, 123, 165, 67, 125], [1, 1, 1, 155, 100, 155, 54, 72, 42, 130, 199, 93, 72, 162, 96, 110, 40,
        91, 181, 26, 128, 152, 190, 114, 40, 141, 125, 101]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 25, [0, 0, 0] + [1] * 25], dtype=torch.int64),
    'image_embeds_position_mask': torch.tensor([[False] * 8 + [True] * 16 + [False] * 4,
        [False] * 7 + [True] * 16 + [False] * 5], dtype=torch.bool),
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
