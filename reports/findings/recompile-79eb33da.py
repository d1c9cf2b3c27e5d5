"""[torch.compile] recompiles every decode step at kwargs['cache'].self_attention_cache.layers[#].cumulative_length_int
== # @ transformers.models.t5gemma.modeling_t5gemma:T5GemmaDecoder.forward: T5GemmaForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, bfloat16). Run: python recompile-79eb33da.py
The suite saw: decode step recompiled after the first step; failed guard:
kwargs['cache'].self_attention_cache.layers[0].cumulative_length_int == 4 (at ...
Shared by 1 class(es), 6 cell(s) of 6 check(s) (index.json lists them).
"""

import torch
from transformers import T5GemmaConfig, T5GemmaForConditionalGeneration, T5GemmaModuleConfig
from torch._dynamo.utils import counters, guard_failures
from transformers import LogitsProcessorList
from transformers.generation.configuration_utils import CompileConfig

CONFIG = T5GemmaConfig(
    encoder=T5GemmaModuleConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        layer_types=['sliding_attention', 'full_attention'], dropout_rate=0.0),
    decoder=T5GemmaModuleConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        layer_types=['sliding_attention', 'full_attention'], is_decoder=True, dropout_rate=0.0,
        cross_attention_hidden_size=64),
    vocab_size=256)
DTYPE = torch.bfloat16
BACKEND = 'eager'
NEW_TOKENS = 5


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = T5GemmaForConditionalGeneration(CONFIG)
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
    """The inputs compile_decode fed: token ids literal."""
    inputs = {
        'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
        'decoder_input_ids': torch.tensor([[0, 123, 191], [0, 116, 17]], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


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
