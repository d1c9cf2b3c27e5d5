"""[torch.compile] raises at transformers.models.kosmos2.modeling_kosmos2:Kosmos2TextTransformer.forward_embedding:
Kosmos2ForConditionalGeneration (compile_decode).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-05b6f0fb.py
The suite saw: IndexError: The shape of the mask [2, 76] at index 1 does not match the shape of the indexed tensor
[2, 80, 64] at index 1 (at transformers/models/kosmos2/modeling_kosmos2.py:938)
Shared by 1 class(es), 6 cell(s) of 6 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import Kosmos2Config, Kosmos2ForConditionalGeneration, Kosmos2TextConfig, Kosmos2VisionConfig
from transformers.generation.configuration_utils import CompileConfig

CONFIG = Kosmos2Config(
    text_config=Kosmos2TextConfig(vocab_size=256, embed_dim=64, layers=2, ffn_dim=128, attention_heads=4),
    vision_config=Kosmos2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8))
BACKEND = 'eager'
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return Kosmos2ForConditionalGeneration(CONFIG).eval()


# The inputs compile_decode fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[1, 1, 1, 66, 10, 187, 194, 174, 153, 99, 85, 52, 6, 151, 56, 186, 77, 83, 16, 105, 69,
        173, 110, 178, 110, 125, 54, 174, 76, 10, 98, 20, 135, 137, 136, 140, 151, 25, 57, 90, 36, 124, 166, 69, 124,
        51, 170, 119, 38, 78, 141, 123, 103, 180, 10, 87, 119, 88, 89, 91, 199, 112, 98, 69, 43, 170, 89, 73, 54, 80,
        23, 121, 108, 164, 68, 44], [1, 1, 1, 144, 128, 75, 64, 118, 95, 16, 24, 38, 70, 81, 127, 93, 96, 73, 86, 55,
        20, 109, 52, 175, 23, 32, 80, 197, 56, 99, 38, 98, 133, 44, 112, 61, 135, 5, 120, 3, 46, 86, 46, 111, 32, 17,
        154, 136, 84, 143, 104, 75, 157, 122, 138, 181, 71, 133, 179, 82, 36, 120, 103, 148, 33, 90, 117, 65, 53, 119,
        195, 187, 160, 196, 38, 138]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 73, [0, 0, 0] + [1] * 73], dtype=torch.int64),
    'image_embeds_position_mask': torch.tensor([[False] * 8 + [True] * 64 + [False] * 4,
        [False] * 7 + [True] * 64 + [False] * 5], dtype=torch.bool),
    'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
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
cache = static_cache(model.text_model.config.get_text_config(decoder=True), 76 + NEW_TOKENS,
    2)  # what generate makes for a static cache
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
with torch.no_grad():
    model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                   disable_compile=False, cache=cache, compile_config=config)
