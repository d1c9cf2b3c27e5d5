"""[torch.compile] graph break under fullgraph at transformers.models.bart.modeling_bart:BartEncoderLayer.forward:
BartForConditionalGeneration (compile_prefill, backend inductor).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python graph_break-5ba0c3ab.py
The suite saw: fullgraph compile failed: Unsupported: Data-dependent branching: Detected data-dependent branching
(e.g. `if my_tensor.sum() > 0:`). Dynamo does not support tracing dynamic control flow. (at ...
Shared by 2 class(es), 4 cell(s) of 2 check(s) (index.json lists them).
"""

import torch
from transformers import BartConfig, BartForConditionalGeneration

CONFIG = BartConfig(vocab_size=256, encoder_layers=2, encoder_ffn_dim=128, encoder_attention_heads=4,
    decoder_layers=2, decoder_ffn_dim=128, decoder_attention_heads=4, d_model=64)
DTYPE = torch.float16
BACKEND = 'inductor'


def tiny_model():
    torch.manual_seed(0)
    return BartForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs compile_prefill fed: token ids literal."""
    inputs = {
        'input_ids': torch.tensor([[1, 1, 1, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
        'decoder_input_ids': torch.tensor([[2, 123, 191], [2, 116, 17]], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


inputs = sample_inputs()
compiled = torch.compile(tiny_model(), fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # compiled before any eager call on this instance
