"""[torch.compile] backend compile fails at <inductor generated code>:call: SmolVLMForConditionalGeneration
(compile_prefill, backend inductor).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python backend-757e1f6a.py
The suite saw: fullgraph compile failed: inductor failed where dynamo alone traces the same call fullgraph (backend
eager): its generated code raised: AssertionError: expected size 64==64, stride 1==16 at dim=1; expected size  ...
Shared by 4 class(es), 12 cell(s) of 3 check(s) (index.json lists them).
"""

import torch
from transformers import LlamaConfig, SmolVLMConfig, SmolVLMForConditionalGeneration, SmolVLMVisionConfig

CONFIG = SmolVLMConfig(image_token_id=255,
    vision_config=SmolVLMVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8),
    text_config=LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, rms_norm_eps=1e-05, head_dim=16),
    _pad_token_id=254)
DTYPE = torch.float16
BACKEND = 'inductor'


def tiny_model():
    torch.manual_seed(0)
    return SmolVLMForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs compile_prefill fed: token ids literal; pixel_values seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    inputs = {
        'input_ids': torch.tensor([[254, 254, 254, 66, 10, 187, 194, 174] + [255] * 4 + [108, 164, 68, 44], [254, 254,
            254, 153, 99, 85, 52] + [255] * 4 + [6, 151, 56, 186, 77]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 13, [0, 0, 0] + [1] * 13], dtype=torch.int64),
        'pixel_values': torch.randn((2, 1, 3, 32, 32), generator=g, dtype=torch.float32),
        'pixel_attention_mask': torch.full((2, 1, 32, 32), True, dtype=torch.bool),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


inputs = sample_inputs()
with torch.no_grad():  # dynamo alone (backend eager) traces the same call fullgraph
    torch.compile(tiny_model(), fullgraph=True, backend="eager")(**inputs)
torch._dynamo.reset()
compiled = torch.compile(tiny_model(), fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # compiled before any eager call on this instance
