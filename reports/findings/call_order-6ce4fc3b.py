"""[torch.compile] compile verdict depends on an earlier eager call at
transformers.utils.output_capturing:maybe_install_capturing_hooks: AyaVisionForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python call_order-6ce4fc3b.py
The suite saw: call order changes the verdict: compiled before any eager call: fullgraph compile failed:
Unsupported: Unsupported context manager: Dynamo does not know how to enter a `lock` context manager. (at ...
Shared by 10 class(es), 18 cell(s) of 2 check(s) (index.json lists them).
"""

import torch
from transformers import AyaVisionConfig, AyaVisionForConditionalGeneration, Cohere2Config, SiglipVisionConfig

CONFIG = AyaVisionConfig(
    vision_config=SiglipVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vision_use_head=False),
    text_config=Cohere2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, eos_token_id=254,
        layer_types=['sliding_attention', 'full_attention'], head_dim=16),
    image_token_index=255)
BACKEND = 'eager'


def tiny_model():
    torch.manual_seed(0)
    return AyaVisionForConditionalGeneration(CONFIG).eval()


# The inputs compile_prefill fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 1, 2, 3, 4, 6, 252, 248] + [255] * 4 + [251, 7, 8, 9, 10], list(range(11,
        17)) + [252, 248] + [255] * 4 + [251, 17, 18, 19, 20, 21]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0] + [1] * 16, [1] * 18], dtype=torch.int64),
    'pixel_values': (torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32) * 1.09 + 0.192),
}

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
