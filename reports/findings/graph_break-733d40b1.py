"""[torch.compile] graph break under fullgraph at transformers.models.longt5.modeling_longt5:LongT5Block.forward:
LongT5ForConditionalGeneration (compile_decode).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python graph_break-733d40b1.py
The suite saw: generate with a StaticCache and compiled decode failed: Unsupported: Data-dependent branching:
Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). Dynamo does not support tracing dynamic co ...
Shared by 1 class(es), 4 cell(s) of 4 check(s) (index.json lists them).
"""

import torch
from transformers import LongT5Config, LongT5ForConditionalGeneration
from transformers.generation.configuration_utils import CompileConfig

CONFIG = LongT5Config(vocab_size=256, d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
    decoder_start_token_id=0)
DTYPE = torch.float16
BACKEND = 'eager'
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return LongT5ForConditionalGeneration(CONFIG).to(DTYPE).eval()


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


inputs = sample_inputs()
model = tiny_model()
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
with torch.no_grad():
    model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                   disable_compile=False, cache_implementation="static", compile_config=config)
