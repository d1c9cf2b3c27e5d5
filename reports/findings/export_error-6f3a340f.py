"""[transformers.exporters] export fails at transformers.exporters.runners.base:ModelRunner.unflatten:
AyaVisionForConditionalGeneration (exporter_openvino_nncf_openvino_weights_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-6f3a340f.py
The suite saw: run: openvino runner of component 'decode': StopIteration: StopIteration() (at
transformers/exporters/runners/base.py:51)
Shared by 88 class(es), 335 cell(s) of 5 check(s) (index.json lists them).
"""

import copy
import inspect

import torch
from transformers import AyaVisionConfig, AyaVisionForConditionalGeneration, Cohere2Config, SiglipVisionConfig
from transformers import LogitsProcessorList
from transformers.exporters import OpenVINOExporter, OpenVINOConfig
from transformers.exporters.quantizers import NNCFOpenVINOQuantizer, NNCFWeightCompressionConfig

CONFIG = AyaVisionConfig(
    vision_config=SiglipVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vision_use_head=False),
    text_config=Cohere2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, eos_token_id=254,
        layer_types=['sliding_attention', 'full_attention'], head_dim=16),
    image_token_index=255)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 28, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}
NEW_TOKENS = 4


def tiny_model():
    torch.manual_seed(0)
    return AyaVisionForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_nncf_openvino_weights_generate fed: token ids literal; pixel_values seeded random of
# the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([list(range(11, 17)) + [252, 248] + [255] * 4 + [251, 17, 18, 19, 20, 21]],
        dtype=torch.int64),
    'attention_mask': torch.full((1, 18), 1, dtype=torch.int64),
    'pixel_values': (torch.randn((1, 3, 32, 32), generator=g, dtype=torch.float32) * 1.08 + 0.205),
}

class ForceTokens:
    """A logits processor: greedy decoding that follows the given tokens (the eager run's)."""

    def __init__(self, tokens):
        self.tokens, self.step = tokens, 0

    def __call__(self, input_ids, scores):
        forced = torch.full_like(scores, float("-inf"))
        forced.scatter_(1, self.tokens[:, self.step:self.step + 1], 0.0)
        self.step += 1
        return forced


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
quantizer = NNCFOpenVINOQuantizer(NNCFWeightCompressionConfig(), calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = OpenVINOExporter(), OpenVINOConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
runners = exported.to("cpu", config={'INFERENCE_PRECISION_HINT': 'f32'}).runners
model = tiny_model()
eager_calls = route(model, runners)
request = inputs
with torch.no_grad():
    expected = tiny_model().generate(**copy.deepcopy(request), generation_config=copy.deepcopy(config))
    follow = ForceTokens(expected.sequences[:, -NEW_TOKENS:])  # eager float's tokens
    actual = model.generate(**copy.deepcopy(request), generation_config=copy.deepcopy(config),
                            logits_processor=LogitsProcessorList([follow]))
