"""[transformers.exporters] wrong numbers at logits from the components differ: MoshiForConditionalGeneration
(exporter_onnx_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python numerical_mismatch-fd287f39.py
The suite saw: sample: step 2: logits from the components differ from eager generate by 0.000557 > 0.0001
Shared by 2 class(es), 2 cell(s) of 1 check(s) (index.json lists them).
"""

import copy
import inspect

import torch
from transformers import MimiConfig, MoshiConfig, MoshiDepthConfig, MoshiForConditionalGeneration
from transformers.exporters import OnnxExporter, OnnxConfig

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
ATOL = 0.0001
RTOL = 1.3e-06


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = MoshiForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


# The inputs exporter_onnx_generate fed: token ids literal.
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

def close(actual, expected, atol, rtol):
    """(within, "<diff> > <allowed>" at the worst element): |actual - expected| <= atol + rtol * |expected|
    elementwise, equal entries (two equal infinities too) differ by 0, NaN is beyond any tolerance."""
    if actual.shape != expected.shape:
        raise AssertionError(f"logits shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if not actual.numel():
        return True, ""
    a, e = actual.detach().double().flatten(), expected.detach().double().flatten()
    delta, allowed = torch.where(a == e, torch.zeros_like(a), (a - e).abs()), atol + rtol * e.abs()
    ratios = delta / allowed
    worst = int(ratios.isnan().nonzero()[0]) if ratios.isnan().any() else int(ratios.argmax())
    return bool(ratios[worst] <= 1.0), f"{float(delta[worst]):.3g} > {float(allowed[worst]):.3g}"


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
exporter, export_config = OnnxExporter(), OnnxConfig(dynamic=True)
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
with torch.no_grad():
    expected = tiny_model().generate(**inputs, generation_config=config)
tokens, wanted = actual.sequences[:, -NEW_TOKENS:], expected.sequences[:, -NEW_TOKENS:]
if not torch.equal(tokens, wanted):
    step = int((tokens != wanted).any(0).nonzero()[0])
    raise AssertionError(f"tokens from the components differ at new token {step} from eager "
                         f"generate: {tokens[0].tolist()} vs {wanted[0].tolist()}")
for step, (a, e) in enumerate(zip(actual.logits, expected.logits)):
    within, beyond = close(a.float(), e.float(), ATOL, RTOL)
    if not within:
        raise AssertionError(f"step {step}: logits from the components differ from eager generate by {beyond}")
