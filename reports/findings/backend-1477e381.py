"""[torch.compile] backend compile fails at
torch._inductor.kernel.bmm:tuned_bmm.<locals>.is_preferred_layout_as_bmm_input: Glm5NextForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python backend-1477e381.py
The suite saw: generate with a StaticCache and compiled decode failed: inductor failed where dynamo alone traces the
same call fullgraph (backend eager): compiling the traced graph failed: LoweringException: ...
Shared by 2 class(es), 7 cell(s) of 7 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import Glm5NextConfig, Glm5NextForConditionalGeneration, Glm5NextTextConfig, Glm5NextVisionConfig
from transformers.generation.configuration_utils import CompileConfig

CONFIG = Glm5NextConfig(
    text_config=Glm5NextTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4, kv_lora_rank=32,
        q_lora_rank=32, v_head_dim=16, qk_nope_head_dim=8, num_experts_per_tok=2, pad_token_id=249,
        mlp_layer_types=['dense', 'sparse'], index_head_dim=16, index_n_heads=4,
        layer_types=['linear_attention', 'indexed_attention'], indexer_types=['full', 'full'], linear_head_dim=16,
        linear_num_heads=4, qk_head_dim=8),
    vision_config=Glm5NextVisionConfig(depth=2, hidden_size=64, num_heads=4, image_size=32, patch_size=8,
        out_hidden_size=64, intermediate_size=128, projection_intermediate_size=128),
    image_token_id=254, video_token_id=255, image_start_token_id=250, image_end_token_id=251,
    video_start_token_id=252, video_end_token_id=253)
DTYPE = torch.float16
BACKEND = 'inductor'
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return Glm5NextForConditionalGeneration(CONFIG).to(DTYPE).eval()


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
        'input_ids': torch.tensor([[249, 249, 249, 154, 175, 161, 48, 73, 250] + [254] * 4 + [251, 132, 54, 43, 99],
            [249, 249, 249, 13, 185, 190, 125, 250] + [254] * 4 + [251, 81, 143, 70, 68, 177]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
        'pixel_values': torch.randn((32, 384), generator=g, dtype=torch.float32),
        'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
        'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6],
            dtype=torch.int64),
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
cache = static_cache(model.config.get_text_config(decoder=True), 18 + NEW_TOKENS,
    2)  # what generate makes for a static cache
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
with torch.no_grad():
    model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                   disable_compile=False, cache=cache, compile_config=config)
