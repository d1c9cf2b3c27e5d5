"""[torch.compile] raises at transformers.models.inkling2_loop.modeling_inkling2_loop:Inkling2LoopTopKRouter.forward:
Inkling2LoopForConditionalGeneration (compile_decode, backend inductor).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, bfloat16). Run: python exception-c760b9fb.py
The suite saw: RuntimeError: expected m1 and m2 to have the same dtype, but got: float != c10::BFloat16 (at
transformers/models/inkling2_loop/modeling_inkling2_loop.py:1167)
Shared by 1 class(es), 14 cell(s) of 14 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import (Inkling2LoopConfig, Inkling2LoopForConditionalGeneration, Inkling2LoopTextConfig,
    Inkling2VisionConfig)
from transformers.generation.configuration_utils import CompileConfig

CONFIG = Inkling2LoopConfig(
    text_config=Inkling2LoopTextConfig(vocab_size=256, unpadded_vocab_size=256, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, swa_num_attention_heads=4,
        swa_num_key_value_heads=2, swa_head_dim=16, layer_types=['hybrid_sliding', 'hybrid'],
        moe_intermediate_size=128, n_routed_experts=4, num_experts_per_tok=2, eos_token_id=254),
    vision_config=Inkling2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, patch_size=8, projection_hidden_dim=256, text_hidden_size=64),
    image_token_id=255)
DTYPE = torch.bfloat16
BACKEND = 'inductor'
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return Inkling2LoopForConditionalGeneration(CONFIG).to(DTYPE).eval()


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
        'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174] + [255] * 4 + [108, 164, 68, 44], [0, 0, 0, 153, 99,
            85, 52] + [255] * 4 + [6, 151, 56, 186, 77]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 13, [0, 0, 0] + [1] * 13], dtype=torch.int64),
        'pixel_values': torch.randn((8, 16, 16, 3), generator=g, dtype=torch.float32),
        'image_grid_thw': torch.tensor([[1, 2, 2], [1, 2, 2]], dtype=torch.int64),
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
cache = static_cache(model.config.get_text_config(decoder=True), 16 + NEW_TOKENS,
    2)  # what generate makes for a static cache
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
with torch.no_grad():
    model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                   disable_compile=False, cache=cache, compile_config=config)
