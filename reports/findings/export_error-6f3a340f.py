"""[transformers.exporters] export fails at transformers.exporters.runners.base:ModelRunner.unflatten:
PocketTTSForConditionalGeneration (exporter_openvino_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-6f3a340f.py
The suite saw: openvino runner of component 'decode': StopIteration: StopIteration() (at
transformers/exporters/runners/base.py:51)
Shared by 84 class(es), 84 cell(s) of 1 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import PocketTTSConfig, PocketTTSFlowHeadConfig, PocketTTSForConditionalGeneration
from transformers.exporters import OpenVINOExporter, OpenVINOConfig

CONFIG = PocketTTSConfig(
    flow_head_config=PocketTTSFlowHeadConfig(hidden_size=64, num_hidden_layers=2, condition_dim=64,
        loss_weighting_num_layers=2),
    vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
    intermediate_size=128, audio_prompt_token_id=252, audio_latent_token_id=253, audio_prompt_bos_token_id=254,
    audio_bos_token_id=255)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 20, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 3,
}


def tiny_model():
    torch.manual_seed(0)
    return PocketTTSForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_generate fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[143, 147, 57, 135, 69, 46, 124, 23, 118, 255]], dtype=torch.int64),
    'attention_mask': torch.full((1, 10), 1, dtype=torch.int64),
}

def runner_kwargs(runner, owner, inputs):
    """What a runner is called with: the output flags dropped, the exporter's own `precompute_export_inputs`
    applied, only the kwargs its graph was traced with."""
    from transformers.exporters.utils import precompute_export_inputs

    flags = ("use_cache", "output_attentions", "output_hidden_states", "return_dict", "return_loss")
    ready = {key: value for key, value in inputs.items() if key not in flags}
    with torch.no_grad():
        precompute_export_inputs(owner, ready)
    metadata = runner.metadata
    return {key: value for key, value in ready.items() if key in metadata.kwargs and key not in metadata.in_constants}


def bound(original, args, kwargs):
    """A call's arguments by name, `**kwargs` merged."""
    signature = inspect.signature(original)
    named = {}
    for name, value in signature.bind(*args, **kwargs).arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            named.update(value)
        elif kind is not inspect.Parameter.VAR_POSITIONAL:
            named[name] = value
    return named


class RoutedGenerate:
    """A fresh model whose named submodules (transformers' `_find_multimodal_submodules`) that are components call
    their runners, whose first forward of a generate goes to the `prefill` runner (if any, else its own code) and
    every later one to `decode`; `eager_calls` counts the calls of named submodules no component covers (their
    PyTorch code ran)."""

    def __init__(self, model, runners):
        import functools

        from transformers.exporters.utils import _find_multimodal_submodules

        self.model, self.calls, self.eager_calls = model, 0, {}
        submodules = _find_multimodal_submodules(model)
        for name, module in submodules.items():
            if name not in runners:
                module.register_forward_hook(lambda *_, name=name: self.eager_calls.__setitem__(
                    name, self.eager_calls.get(name, 0) + 1))
        for name, runner in runners.items():
            if name not in ("prefill", "decode"):
                self._route(submodules[name], runner)
        original, prefill, decode = model.forward, runners.get("prefill"), runners["decode"]

        @functools.wraps(original)
        def forward(*args, **kwargs):
            first, self.calls = self.calls == 0, self.calls + 1
            if first and prefill is None:
                return original(*args, **kwargs)
            runner = prefill if first else decode
            return runner(**runner_kwargs(runner, model, bound(original, args, kwargs)))

        model.forward = forward

    def _route(self, module, runner):
        import functools

        original = module.forward

        @functools.wraps(original)
        def forward(*args, **kwargs):
            return runner(**runner_kwargs(runner, module, bound(original, args, kwargs)))

        module.forward = forward

    def generate(self, request, config):
        import copy

        self.calls = 0
        with torch.no_grad():
            return self.model.generate(**copy.deepcopy(request), generation_config=copy.deepcopy(config))


config = tiny_model().generation_config
config.update(**GENERATION)
exporter, export_config = OpenVINOExporter(), OpenVINOConfig(dynamic=True)
exported = exporter.export_for_generation(tiny_model(), dict(inputs), export_config,
                                           generation_config=config)
runners = exported.to("cpu", config={'INFERENCE_PRECISION_HINT': 'f32'}).runners
routed = RoutedGenerate(tiny_model(), runners)
actual = routed.generate(inputs, config)
