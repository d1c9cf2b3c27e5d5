"""[torch.compile] contract broken at decode step #: compiled static-cache logits differ from eager dynamic-cache
decoding by # > #: Blip2ForConditionalGeneration:blip2-flan-t5 (compile_decode, backend inductor).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, bfloat16). Run: python contract-1c1ba0d4.py
The suite saw: decode step 1: compiled static-cache logits differ from eager dynamic-cache decoding by 0.0142 >
0.0106
Shared by 9 class(es), 10 cell(s) of 2 check(s) (index.json lists them).
"""

import torch
from transformers import Blip2Config, Blip2ForConditionalGeneration, Blip2QFormerConfig, Blip2VisionConfig, T5Config
from torch._dynamo.utils import counters, guard_failures
from transformers import LogitsProcessorList
from transformers.generation.configuration_utils import CompileConfig

CONFIG = Blip2Config(is_encoder_decoder=True,
    vision_config=Blip2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, initializer_range=0.02),
    qformer_config=Blip2QFormerConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, encoder_hidden_size=64),
    text_config=T5Config(vocab_size=256, d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
        feed_forward_proj='gated-gelu', dense_act_fn='relu', is_gated_act=False, decoder_start_token_id=0),
    image_text_hidden_size=64, image_token_index=255, use_decoder_only_language_model=False)
DTYPE = torch.bfloat16
BACKEND = 'inductor'
ATOL = 0.01
RTOL = 0.016
NEW_TOKENS = 5


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = Blip2ForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.to(DTYPE).eval()


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
        'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174] + [255] * 32 + [108, 164, 68, 44], [0, 0, 0, 153,
            99, 85, 52] + [255] * 32 + [6, 151, 56, 186, 77]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 41, [0, 0, 0] + [1] * 41], dtype=torch.int64),
        'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
        'decoder_input_ids': torch.tensor([[0, 83, 16], [0, 105, 69]], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


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


class ForceTokens:
    """A logits processor: greedy decoding that follows the given tokens (the eager run's)."""

    def __init__(self, tokens):
        self.tokens, self.step = tokens, 0

    def __call__(self, input_ids, scores):
        forced = torch.full_like(scores, float("-inf"))
        forced.scatter_(1, self.tokens[:, self.step:self.step + 1], 0.0)
        self.step += 1
        return forced


def greedy(model, inputs, new_tokens, **extra):
    """Greedy generate of exactly `new_tokens` tokens (EOS cannot stop it), generate's auto-compile off."""
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, disable_compile=True, **extra)


inputs = sample_inputs()
eager = greedy(tiny_model(), inputs, NEW_TOKENS, output_logits=True, return_dict_in_generate=True)
model = tiny_model()
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
torch._dynamo.reset()
counters.clear()
with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=NEW_TOKENS + 1):  # count each recompile
    compiled = model.generate(
        **inputs, do_sample=False, num_beams=1, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
        disable_compile=False, cache_implementation="static", compile_config=config, output_logits=True,
        return_dict_in_generate=True,
        logits_processor=LogitsProcessorList([ForceTokens(eager.sequences[:,
            -NEW_TOKENS:])]))  # forced onto the eager tokens
breaks = list(counters["graph_break"])
if breaks:
    raise AssertionError(f"the compiled decode step has {len(breaks)} graph break(s), first: "
                                 f"{breaks[0]}")
if not counters["stats"]["unique_graphs"]:
    raise AssertionError("generate did not compile the decode step (its cache is not a "
                  "compileable static cache, or the model's generate bypasses compilation)")
failed = [str(reason) for reasons in guard_failures.values() for reason in reasons]
if failed:
    raise AssertionError("decode step recompiled after the first step; failed guard: " + failed[0])
for step, (actual, expected) in enumerate(zip(compiled.logits, eager.logits)):
    within, beyond = close(actual, expected, ATOL, RTOL)
    if not within:
        what = "prefill" if step == 0 else f"decode step {step}"
        raise AssertionError(f"{what}: compiled static-cache logits differ from eager "
                                  f"dynamic-cache decoding by {beyond}")
