"""[torch.compile] compile verdict depends on an earlier eager call at
transformers.utils.output_capturing:maybe_install_capturing_hooks: LlavaForConditionalGeneration (compile_prefill).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, bfloat16). Run: python call_order-6ce4fc3b.py
The suite saw: call order changes the verdict: compiled before any eager call: fullgraph compile failed:
Unsupported: Unsupported context manager: Dynamo does not know how to enter a `lock` context manager. (at ...
Shared by 10 class(es), 60 cell(s) of 6 check(s) (index.json lists them).
"""

import torch
from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

CONFIG = LlavaConfig(
    vision_config=CLIPVisionConfig(hidden_size=64, intermediate_size=128, projection_dim=64, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vocab_size=256),
    text_config=LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16),
    image_token_index=255)
DTYPE = torch.bfloat16
BACKEND = 'eager'


def tiny_model():
    torch.manual_seed(0)
    return LlavaForConditionalGeneration(CONFIG).to(DTYPE).eval()


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
        'input_ids': torch.tensor([[0, 0, 3, 4, 5, 6, 7] + [255] * 16 + [8, 9, 10, 11], list(range(12,
            18)) + [255] * 16 + [18, 19, 20, 21, 22]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0] + [1] * 25, [1] * 27], dtype=torch.int64),
        'pixel_values': (torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32) * 1.09 + 0.192),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


def logits_of(output):
    """The logits of a model output: `logits`, a scorer's first `logits*` field, a tuple's first tensor."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict) and "logits" in output:
        return output["logits"]
    if isinstance(getattr(output, "logits", None), torch.Tensor):
        return output.logits
    if isinstance(output, dict):
        for key, value in output.items():
            if key.startswith("logits") and isinstance(value, torch.Tensor):
                return value
    return output[0]


inputs = sample_inputs()
model = tiny_model()
compiled = torch.compile(model, fullgraph=True, backend=BACKEND)
reference = tiny_model()  # a second instance, same weights
with torch.no_grad():
    expected = logits_of(reference(**inputs))
def attempt(module):
    """The exception a compiled call raises, None when it runs."""
    try:
        with torch.no_grad():
            module(**inputs)
    except Exception as exc:
        return exc
    return None

cold = attempt(compiled)  # compiled before any eager call: fails
with torch.no_grad():  # the eager-called instance, traced once with graph breaks allowed
    torch.compile(reference, backend="eager")(**inputs)
torch._dynamo.reset()
warm = attempt(torch.compile(reference, fullgraph=True, backend=BACKEND))  # compiled after eager
print(f"compiled before any eager call: {cold or 'pass'}; after an eager call: {warm or 'pass'}")
if (cold is None) != (warm is None):  # the call order changes the verdict: the failing one, as raised
    raise cold or warm
