"""[torch.compile] raises at transformers.integrations.sdpa_attention:sdpa_attention_forward:
MllamaForConditionalGeneration (compile_decode).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, bfloat16). Run: python exception-37f33ab0.py
The suite saw: RuntimeError: The size of tensor a (17) must match the size of tensor b (13) at non-singleton
dimension 2 (at transformers/integrations/sdpa_attention.py:182)
Shared by 1 class(es), 6 cell(s) of 6 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import MllamaConfig, MllamaForConditionalGeneration, MllamaTextConfig, MllamaVisionConfig
from transformers.generation.configuration_utils import CompileConfig

CONFIG = MllamaConfig(
    vision_config=MllamaVisionConfig(hidden_size=64, num_hidden_layers=2, num_global_layers=2, attention_heads=4,
        intermediate_size=128, vision_output_dim=192, image_size=32, patch_size=8,
        intermediate_layers_indices=[0, 1]),
    text_config=MllamaTextConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=128, cross_attention_layers=[1], bos_token_id=252,
        eos_token_id=253, pad_token_id=254),
    image_token_index=255)
DTYPE = torch.bfloat16
BACKEND = 'eager'
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return MllamaForConditionalGeneration(CONFIG).to(DTYPE).eval()


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
        'input_ids': torch.tensor([[254, 254, 254, 154, 175, 161, 48, 73, 255, 132, 54, 43, 99], [254, 254, 254, 13,
            185, 190, 125, 255, 81, 143, 70, 68, 177]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 10, [0, 0, 0] + [1] * 10], dtype=torch.int64),
        'pixel_values': (torch.randn((2, 1, 4, 3, 32, 32), generator=g, dtype=torch.float32) * 0.709 + -0.0063),
        'aspect_ratio_ids': torch.full((2, 1), 2, dtype=torch.int64),
        'aspect_ratio_mask': torch.tensor([[[1, 1, 0, 0]], [[1, 1, 0, 0]]], dtype=torch.int64),
        'cross_attention_mask': torch.tensor([[[[0] * 4], [[0] * 4], [[0] * 4], [[0] * 4], [[0] * 4], [[0] * 4],
            [[0] * 4], [[0] * 4], [[1, 1, 0, 0]], [[1, 1, 0, 0]], [[1, 1, 0, 0]], [[1, 1, 0, 0]], [[1, 1, 0, 0]]],
            [[[0] * 4], [[0] * 4], [[0] * 4], [[0] * 4], [[0] * 4], [[0] * 4], [[0] * 4], [[1, 1, 0, 0]], [[1, 1, 0,
            0]], [[1, 1, 0, 0]], [[1, 1, 0, 0]], [[1, 1, 0, 0]], [[1, 1, 0, 0]]]], dtype=torch.int64),
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
cache = static_cache(model.config.get_text_config(decoder=True), 13 + NEW_TOKENS,
    2)  # what generate makes for a static cache
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
with torch.no_grad():
    model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                   disable_compile=False, cache=cache, compile_config=config)
