"""[transformers.exporters] export fails at
transformers.exporters.runners.runner_openvino:OpenVINOModelRunner.from_program: Glm5NextForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-9d54bd67.py
The suite saw: openvino runners: RuntimeError: Exception from src/inference/src/cpp/core.cpp:117: (at
transformers/exporters/runners/runner_openvino.py:108)
Shared by 1 class(es), 1 cell(s) of 1 check(s) (index.json lists them).
"""

import copy
import inspect

import torch
from transformers import Glm5NextConfig, Glm5NextForConditionalGeneration, Glm5NextTextConfig, Glm5NextVisionConfig
from transformers.exporters import OpenVINOExporter, OpenVINOConfig

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
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 25, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 249,
}


def tiny_model():
    torch.manual_seed(0)
    return Glm5NextForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_generate fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[13, 185, 190, 125, 250] + [254] * 4 + [251, 81, 143, 70, 68, 177]], dtype=torch.int64),
    'attention_mask': torch.full((1, 15), 1, dtype=torch.int64),
    'pixel_values': torch.randn((16, 384), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 5 + [1] * 4 + [0] * 6], dtype=torch.int64),
}

def runner_kwargs(runner, owner, inputs):
    """What a runner is called with: the output flags dropped, the exporter's own `precompute_export_inputs`
    applied, only the kwargs its graph was traced with."""
    from transformers.exporters.utils import precompute_export_inputs

    flags = ("use_cache", "output_attentions", "output_hidden_states", "return_dict", "return_loss")
    ready = {key: value for key, value in inputs.items() if key not in flags}
    with torch.no_grad():
        precompute_export_inputs(owner, ready)
    traced, constants = runner.metadata.kwargs, runner.metadata.in_constants
    return {key: value for key, value in ready.items() if key in traced and key not in constants}


def route(model, runners):
    """Makes `model` call its runners: a named submodule (transformers' `_find_multimodal_submodules`) that is a
    component its own, the first forward of a generate `prefill` (if any, else its own code), every later one
    `decode`. Returns the names of the calls of named submodules no component covers (their PyTorch code ran)."""
    import functools

    from transformers.exporters.utils import _find_multimodal_submodules

    eager_calls, forwards = [], []

    def to_runner(module, pick):  # each call to the runner pick() names (None: the module's own code)
        original = module.forward

        @functools.wraps(original)
        def forward(*args, **kwargs):
            runner = pick()
            if runner is None:
                return original(*args, **kwargs)
            named = inspect.signature(original).bind(*args, **kwargs).arguments  # by name, **kwargs merged
            kinds = {k: p.kind for k, p in inspect.signature(original).parameters.items()}
            spread = (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
            call = {k: v for k, v in named.items() if kinds[k] not in spread}
            call.update(next((v for k, v in named.items() if kinds[k] is inspect.Parameter.VAR_KEYWORD), {}))
            return runner(**runner_kwargs(runner, module, call))

        module.forward = forward

    submodules = _find_multimodal_submodules(model)
    for name, module in submodules.items():
        if name not in runners:
            module.register_forward_hook(lambda *_, name=name: eager_calls.append(name))
    for name, runner in runners.items():
        if name not in ("prefill", "decode"):
            to_runner(submodules[name], lambda runner=runner: runner)

    def prefill_then_decode():
        forwards.append(1)
        return runners.get("prefill") if len(forwards) == 1 else runners["decode"]

    to_runner(model, prefill_then_decode)
    return eager_calls


config = tiny_model().generation_config
config.update(**GENERATION)
exporter, export_config = OpenVINOExporter(), OpenVINOConfig(dynamic=True)
exported = exporter.export_for_generation(tiny_model(), dict(inputs), export_config, generation_config=config)
runners = exported.to("cpu", config={'INFERENCE_PRECISION_HINT': 'f32'}).runners
model = tiny_model()
eager_calls = route(model, runners)
with torch.no_grad():
    actual = model.generate(**copy.deepcopy(inputs), generation_config=copy.deepcopy(config))
