"""[torch.compile] data-dependent guard at transformers.models.step3p7.modeling_step3p7:Step3p7Experts.forward:
Step3p7ForConditionalGeneration (compile_decode).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-89b65f3e.py
The suite saw: generate with a StaticCache and compiled decode failed: UserError: Consider annotating your code
using torch._check*(). Could not extract specialized integer from data-dependent expression u0 (unhinted: u0). ...
Shared by 1 class(es), 65 cell(s) of 65 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import Step3p7Config, Step3p7ForConditionalGeneration, Step3p7TextConfig, Step3p7VisionConfig
from transformers.generation.configuration_utils import CompileConfig

CONFIG = Step3p7Config(
    vision_config=Step3p7VisionConfig(hidden_size=64, intermediate_size=373, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8),
    text_config=Step3p7TextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts_per_tok=2, n_routed_experts=4,
        mlp_layer_types=['dense', 'sparse'], layer_types=['full_attention', 'full_attention'],
        moe_intermediate_size=128, sliding_window=512, num_sliding_attention_heads=4, query_pre_attn_scalar=128),
    image_token_id=255)
BACKEND = 'eager'
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return Step3p7ForConditionalGeneration(CONFIG).eval()


# The inputs compile_decode fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[1, 1, 1, 66, 10, 187, 194, 174, 255, 108, 164, 68, 44], [1, 1, 1, 153, 99, 85, 52, 255,
        6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 10, [0, 0, 0] + [1] * 10], dtype=torch.int64),
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
cache = static_cache(model.config.get_text_config(decoder=True), 13 + NEW_TOKENS,
    2)  # what generate makes for a static cache
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
with torch.no_grad():
    model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                   disable_compile=False, cache=cache, compile_config=config)
