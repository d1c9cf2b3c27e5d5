"""[transformers.exporters] export fails at
transformers.exporters.runners.runner_executorch:ExecutorchModelRunner.__init__:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-30ac3268.py
The suite saw: executorch runners: RuntimeError: Failed to load method forward, error: 0x:21 (at
transformers/exporters/runners/runner_executorch.py:39)
Shared by 4 class(es), 4 cell(s) of 2 check(s) (index.json lists them).
"""

import copy
import inspect

import torch
from transformers import (Nemotron3DiarizationAudioConfig, Nemotron3DiarizationConfig, Nemotron3DiarizationHeadConfig,
    Nemotron3DiarizationStreamingConfig, Nemotron3_5TranscribeAsrAudioConfig, Nemotron3_5TranscribeAudioConfig,
    Nemotron3_5TranscribeConfig, Nemotron3_5TranscribeForConditionalGeneration,
    Nemotron3_5TranscribeWordTimestampConfig, NemotronHConfig)
from transformers.exporters import ExecutorchExporter, ExecutorchConfig

CONFIG = Nemotron3_5TranscribeConfig(
    audio_config=Nemotron3_5TranscribeAudioConfig(
        asr_config=Nemotron3_5TranscribeAsrAudioConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=4, num_mel_bins=16),
        diarization_config=Nemotron3DiarizationConfig(
            audio_config=Nemotron3DiarizationAudioConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=4, num_mel_bins=16),
            head_config=Nemotron3DiarizationHeadConfig(hidden_size=64, audio_hidden_size=64),
            streaming_config=Nemotron3DiarizationStreamingConfig(speaker_cache_length=188), chunk_length=500,
            chunk_right_context=50, chunk_left_context=50)),
    text_config=NemotronHConfig(vocab_size=256, hidden_size=64,
        layers_block_type=['linear_attention', 'full_attention', 'moe'], num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=262144, intermediate_size=128,
        ssm_state_size=16, mamba_num_heads=8, mamba_head_dim=16, n_groups=1, n_routed_experts=4,
        moe_intermediate_size=128, moe_shared_expert_intermediate_size=128, routed_scaling_factor=2.5),
    audio_token_id=255,
    word_timestamp_config=Nemotron3_5TranscribeWordTimestampConfig(hidden_size=64, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=4, vocab_size=256, blank_token_id=254))
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 27, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}


def tiny_model():
    torch.manual_seed(0)
    return Nemotron3_5TranscribeForConditionalGeneration(CONFIG).eval()


# The inputs exporter_executorch_generate fed: token ids literal; input_features seeded random of the recorded
# shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[29, 174, 59, 116] + [255] * 8 + [154, 119, 112, 71, 192]], dtype=torch.int64),
    'attention_mask': torch.full((1, 17), 1, dtype=torch.int64),
    'input_features': torch.randn((1, 64, 16), generator=g, dtype=torch.float32),
    'input_features_mask': torch.full((1, 64), 1, dtype=torch.int64),
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
exporter, export_config = ExecutorchExporter(), ExecutorchConfig(dynamic=True)
exported = exporter.export_for_generation(tiny_model(), dict(inputs), export_config, generation_config=config)
runners = exported.to("cpu").runners
model = tiny_model()
eager_calls = route(model, runners)
with torch.no_grad():
    actual = model.generate(**copy.deepcopy(inputs), generation_config=copy.deepcopy(config))
