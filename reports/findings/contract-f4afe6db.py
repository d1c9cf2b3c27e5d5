"""[transformers.exporters] contract broken at transformers.exporters.utils:decompose_for_generation:
SmolVLMForConditionalGeneration (exporter_dynamo_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python contract-f4afe6db.py
The suite saw: export_for_generation left ['connector', 'image_encoder'] out of its components (['decode',
'language_model', 'lm_head']), and generate calls them: the exported model cannot serve a request without PyTo ...
Shared by 66 class(es), 533 cell(s) of 10 check(s) (index.json lists them).
"""

import copy
import inspect

import torch
from transformers import LlamaConfig, SmolVLMConfig, SmolVLMForConditionalGeneration, SmolVLMVisionConfig
from transformers.exporters import DynamoExporter, DynamoConfig

CONFIG = SmolVLMConfig(image_token_id=255,
    vision_config=SmolVLMVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8),
    text_config=LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, rms_norm_eps=1e-05, head_dim=16),
    _pad_token_id=254)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 23, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = SmolVLMForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


# The inputs exporter_dynamo_generate fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[153, 99, 85, 52] + [255] * 4 + [6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.full((1, 13), 1, dtype=torch.int64),
    'pixel_values': torch.randn((1, 1, 3, 32, 32), generator=g, dtype=torch.float32),
    'pixel_attention_mask': torch.full((1, 1, 32, 32), True, dtype=torch.bool),
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
if eager_calls:
    raise AssertionError(f"export_for_generation left {sorted(set(eager_calls))} out of its components "
                         f"({sorted(exported.components)}), and generate calls them (the "
                         'components chosen by transformers.exporters.utils:decompose_for_generation)')
