"""[torch.compile] data-dependent guard at
transformers.models.qwen4_exp.modeling_qwen4_exp:Qwen4ExpTextQSAIndexer.forward: Qwen4ExpForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-a91fe6af.py
The suite saw: generate with a StaticCache and compiled decode failed: UserError: Consider annotating your code
using torch._check*(). Could not guard on data-dependent expression ((u0//4)) > 0 (unhinted: ((u0//4)) > 0). ( ...
Shared by 1 class(es), 23 cell(s) of 23 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import Qwen4ExpConfig, Qwen4ExpForConditionalGeneration, Qwen4ExpTextConfig, Qwen4ExpVisionConfig
from transformers.generation.configuration_utils import CompileConfig

CONFIG = Qwen4ExpConfig(
    text_config=Qwen4ExpTextConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        rope_parameters={'rope_theta': 10000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]}, head_dim=16,
        linear_key_head_dim=16, linear_value_head_dim=16, moe_intermediate_size=128,
        shared_expert_intermediate_size=128, num_experts_per_tok=2, num_experts=4,
        layer_types=['linear_attention', 'indexed_attention'], ple_embed_dim=64, indexer_n_heads=4,
        indexer_kv_heads=1, indexer_head_dim=16, indexer_budget=8, indexer_compress_ratio=4),
    vision_config=Qwen4ExpVisionConfig(depth=2, hidden_size=64, intermediate_size=128, num_heads=4, patch_size=8,
        out_hidden_size=64),
    image_token_id=254, video_token_id=255, vision_start_token_id=252, vision_end_token_id=253)
BACKEND = 'eager'
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return Qwen4ExpForConditionalGeneration(CONFIG).eval()


# The inputs compile_decode fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 154, 175, 161, 48, 73, 252] + [254] * 4 + [253, 132, 54, 43, 99], [0, 0, 0, 13,
        185, 190, 125, 252] + [254] * 4 + [253, 81, 143, 70, 68, 177]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 384), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6], dtype=torch.int64),
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
cache = static_cache(model.config.get_text_config(decoder=True), 18 + NEW_TOKENS,
    2)  # what generate makes for a static cache
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
with torch.no_grad():
    model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                   disable_compile=False, cache=cache, compile_config=config)
