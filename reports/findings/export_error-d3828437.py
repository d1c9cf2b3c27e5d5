"""[transformers.exporters] export fails at
transformers.exporters.runners.runner_executorch:ExecutorchModelRunner.__call__: MoshiForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-d3828437.py
The suite saw: run: executorch runner of component 'decode': RuntimeError: Real spec TreeSpec(StaticCache, {'_t':
'obj', 'p': 'transformers.cache_utils:StaticCache', 's': {'layers': [{'_t': 'obj', 'p': ...
Shared by 40 class(es), 89 cell(s) of 5 check(s) (index.json lists them).
"""

import copy
import inspect

import torch
from transformers import MimiConfig, MoshiConfig, MoshiDepthConfig, MoshiForConditionalGeneration
from transformers import LogitsProcessorList
from transformers.exporters import ExecutorchExporter, ExecutorchConfig
from transformers.exporters.quantizers import NNCFTorchFXQuantizer, NNCFWeightCompressionConfig

CONFIG = MoshiConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=4, audio_vocab_size=64, head_dim=16, ffn_dim=128,
    audio_encoder_config=MimiConfig(hidden_size=64, num_filters=4, codebook_size=64, codebook_dim=64,
        vector_quantization_hidden_dimension=64, upsample_groups=64, num_hidden_layers=2, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16),
    depth_decoder_config=MoshiDepthConfig(vocab_size=256, hidden_size=64, input_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, audio_vocab_size=64, head_dim=16, ffn_dim=128))
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 14, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}
NEW_TOKENS = 4


def tiny_model():
    torch.manual_seed(0)
    return MoshiForConditionalGeneration(CONFIG).eval()


# The inputs exporter_executorch_nncf_fx_generate fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[60, 16, 194, 167, 192, 21, 137, 100, 140]], dtype=torch.int64),
    'attention_mask': torch.full((1, 9), 1, dtype=torch.int64),
    'moshi_audio_codes': torch.tensor([[[38, 40, 52, 17, 15, 4, 41, 42, 58], [31, 56, 1, 1, 39, 41, 57, 35, 38], [55,
        11, 46, 18, 27, 0, 14, 35, 53], [12, 57, 42, 20, 11, 4, 6, 4, 47], [63, 52, 3, 12, 36, 52, 40, 14, 15], [20, 35,
        58, 23, 15, 13, 53, 21, 48], [49, 5, 41, 35, 0, 31, 5, 30, 0], [49, 50, 36, 34, 48, 29, 3, 34, 42]]],
        dtype=torch.int64),
    'user_audio_codes': torch.tensor([[[52, 3, 44, 61, 14, 32, 4, 3, 45], [11, 60, 22, 13, 57, 45, 11, 56, 16], [24, 29,
        21, 46, 25, 16, 60, 57, 54], [53, 61, 19, 33, 40, 32, 36, 59, 59], [57, 6, 21, 31, 13, 7, 56, 24, 15], [41, 18,
        40, 54, 15, 11, 38, 47, 29], [57, 1, 31, 54, 44, 24, 61, 24, 3], [18, 47, 3, 42, 12, 38, 35, 22, 62]]],
        dtype=torch.int64),
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
quantizer = NNCFTorchFXQuantizer(NNCFWeightCompressionConfig(), calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = ExecutorchExporter(), ExecutorchConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
runners = exported.to("cpu").runners
model = tiny_model()
eager_calls = route(model, runners)
request = inputs
with torch.no_grad():
    expected = tiny_model().generate(**copy.deepcopy(request), generation_config=copy.deepcopy(config))
    follow = ForceTokens(expected.sequences[:, -NEW_TOKENS:])  # eager float's tokens
    actual = model.generate(**copy.deepcopy(request), generation_config=copy.deepcopy(config),
                            logits_processor=LogitsProcessorList([follow]))
