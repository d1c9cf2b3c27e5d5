"""[transformers.exporters] export fails at transformers.exporters.runners.runner_dynamo:DynamoModelRunner.__call__:
Cohere2VisionForConditionalGeneration (exporter_dynamo_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-dd71757c.py
The suite saw: dynamo runner of component 'decode': ValueError: Trying to flatten user inputs with exported input
tree spec: (traced cumulative_length_int 13, called with 14) (at transformers/exporters/runners/runner_dynamo.py:54)
Shared by 20 class(es), 37 cell(s) of 3 check(s) (index.json lists them).
"""

import copy
import inspect

import torch
from transformers import (Cohere2Config, Cohere2VisionConfig, Cohere2VisionForConditionalGeneration, SiglipVisionConfig)
from transformers.exporters import DynamoExporter, DynamoConfig

CONFIG = Cohere2VisionConfig(
    vision_config=SiglipVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8),
    text_config=Cohere2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, eos_token_id=254,
        layer_types=['sliding_attention', 'full_attention'], head_dim=16),
    image_token_id=255, alignment_intermediate_size=128)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 23, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}


def tiny_model():
    torch.manual_seed(0)
    return Cohere2VisionForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_generate fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[76, 195, 180, 38] + [255] * 4 + [46, 36, 85, 58, 169]], dtype=torch.int64),
    'attention_mask': torch.full((1, 13), 1, dtype=torch.int64),
    'pixel_values': torch.randn((1, 3, 32, 32), generator=g, dtype=torch.float32),
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
exporter, export_config = DynamoExporter(), DynamoConfig(dynamic=True)
exported = exporter.export_for_generation(tiny_model(), dict(inputs), export_config, generation_config=config)
runners = exported.to("cpu").runners
model = tiny_model()
eager_calls = route(model, runners)
with torch.no_grad():
    actual = model.generate(**copy.deepcopy(inputs), generation_config=copy.deepcopy(config))
