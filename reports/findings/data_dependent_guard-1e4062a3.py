"""[torch.compile] data-dependent guard at transformers.models.nllb_moe.modeling_nllb_moe:NllbMoeExperts.forward:
NllbMoeForConditionalGeneration (compile_decode, backend inductor).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, bfloat16). Run: python data_dependent_guard-1e4062a3.py
The suite saw: generate with a StaticCache and compiled decode failed: UserError: Consider annotating your code
using torch._check*(). Could not extract specialized integer from data-dependent expression u0 (unhinted: u0). ...
Shared by 1 class(es), 28 cell(s) of 28 check(s) (index.json lists them).
"""

import torch
from transformers import NllbMoeConfig, NllbMoeForConditionalGeneration
from transformers.generation.configuration_utils import CompileConfig

CONFIG = NllbMoeConfig(vocab_size=256, encoder_layers=2, encoder_ffn_dim=128, encoder_attention_heads=4,
    decoder_layers=2, decoder_ffn_dim=128, decoder_attention_heads=4, d_model=64, num_experts=4,
    decoder_sparse_step=1)
DTYPE = torch.bfloat16
BACKEND = 'inductor'
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return NllbMoeForConditionalGeneration(CONFIG).to(DTYPE).eval()


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
        'input_ids': torch.tensor([[1, 1, 1, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
        'decoder_input_ids': torch.tensor([[2, 123, 191], [2, 116, 17]], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


inputs = sample_inputs()
model = tiny_model()
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
with torch.no_grad():
    model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                   disable_compile=False, cache_implementation="static", compile_config=config)
