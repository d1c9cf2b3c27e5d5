"""[torch.compile] recompiles every decode step at kwargs['cache'].layers[#].cumulative_length_int == # @
transformers.models.moshi.modeling_moshi:MoshiModel.forward: MoshiForConditionalGeneration (compile_decode).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python recompile-dd73cf00.py
The suite saw: decode step recompiled after the first step; failed guard:
kwargs['cache'].layers[0].cumulative_length_int == 10 (at transformers/models/moshi/modeling_moshi.py:775 in ...
Shared by 1 class(es), 6 cell(s) of 6 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import MimiConfig, MoshiConfig, MoshiDepthConfig, MoshiForConditionalGeneration
from torch._dynamo.utils import counters, guard_failures
from transformers import LogitsProcessorList
from transformers.generation.configuration_utils import CompileConfig

CONFIG = MoshiConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=4, audio_vocab_size=64, head_dim=16, ffn_dim=128,
    audio_encoder_config=MimiConfig(hidden_size=64, num_filters=4, codebook_size=64, codebook_dim=64,
        vector_quantization_hidden_dimension=64, upsample_groups=64, num_hidden_layers=2, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16),
    depth_decoder_config=MoshiDepthConfig(vocab_size=256, hidden_size=64, input_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, audio_vocab_size=64, head_dim=16, ffn_dim=128))
BACKEND = 'eager'
NEW_TOKENS = 5


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = MoshiForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


# The inputs compile_decode fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 28, 28, 107, 145, 199, 139], [60, 16, 194, 167, 192, 21, 137, 100, 140]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'moshi_audio_codes': torch.tensor([[[44, 47, 53, 0, 3, 59, 3, 39, 9], [19, 21, 50, 36, 23, 6, 24, 24, 12], [58, 1,
        38, 39, 23, 46, 24, 17, 37], [25, 13, 8, 9, 20, 51, 16, 51, 5], [62, 15, 47, 0, 18, 35, 24, 49, 51], [29, 19,
        19, 14, 39, 32, 1, 9, 57], [63, 32, 31, 10, 52, 23, 35, 62, 11], [50, 55, 28, 34, 0, 0, 36, 53, 5]], [[38, 40,
        52, 17, 15, 4, 41, 42, 58], [31, 56, 1, 1, 39, 41, 57, 35, 38], [55, 11, 46, 18, 27, 0, 14, 35, 53], [12, 57,
        42, 20, 11, 4, 6, 4, 47], [63, 52, 3, 12, 36, 52, 40, 14, 15], [20, 35, 58, 23, 15, 13, 53, 21, 48], [49, 5, 41,
        35, 0, 31, 5, 30, 0], [49, 50, 36, 34, 48, 29, 3, 34, 42]]], dtype=torch.int64),
    'user_audio_codes': torch.tensor([[[13, 48, 39, 21, 9, 63, 0, 10, 50], [43, 58, 63, 23, 59, 2, 57, 34, 62], [35, 30,
        59, 3, 18, 46, 35, 20, 17], [50, 27, 14, 41, 58, 1, 36, 10, 22], [43, 40, 11, 2, 51, 16, 32, 54, 0], [38, 19,
        46, 42, 51, 56, 60, 40, 13], [30, 24, 61, 2, 3, 30, 34, 43, 13], [48, 40, 8, 19, 31, 8, 26, 2, 56]], [[52, 3,
        44, 61, 14, 32, 4, 3, 45], [11, 60, 22, 13, 57, 45, 11, 56, 16], [24, 29, 21, 46, 25, 16, 60, 57, 54], [53, 61,
        19, 33, 40, 32, 36, 59, 59], [57, 6, 21, 31, 13, 7, 56, 24, 15], [41, 18, 40, 54, 15, 11, 38, 47, 29], [57, 1,
        31, 54, 44, 24, 61, 24, 3], [18, 47, 3, 42, 12, 38, 35, 22, 62]]], dtype=torch.int64),
}


def static_cache(config, max_len, batch_size):
    """The StaticCache generate makes for cache_implementation="static" (the decoder's text config)."""
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kwargs = {"config": config, "max_cache_len": max_len}
    for name in ("max_batch_size", "batch_size"):
        if name in params:
            kwargs[name] = batch_size
    return StaticCache(**kwargs)


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


eager = greedy(tiny_model(), inputs, NEW_TOKENS, output_logits=True, return_dict_in_generate=True)
model = tiny_model()
cache = static_cache(model.config.get_text_config(decoder=True), 10 + NEW_TOKENS,
    2)  # what generate makes for a static cache
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
torch._dynamo.reset()
counters.clear()
with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=NEW_TOKENS + 1):  # count each recompile
    compiled = model.generate(
        **inputs, do_sample=False, num_beams=1, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
        disable_compile=False, cache=cache, compile_config=config, output_logits=True,
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
