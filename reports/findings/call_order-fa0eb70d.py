"""[torch.compile] compile verdict depends on an earlier eager call at
transformers.models.bigbird_pegasus.modeling_bigbird_pegasus:BigBirdPegasusEncoder.forward:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python call_order-fa0eb70d.py
The suite saw: call order changes the verdict: compiled before any eager call: fullgraph compile failed:
Unsupported: logging.Logger method not supported for non-export cases: logging.Logger methods are not supporte ...
Shared by 1 class(es), 4 cell(s) of 4 check(s) (index.json lists them).
"""

import torch
from transformers import BigBirdPegasusConfig, BigBirdPegasusForConditionalGeneration

CONFIG = BigBirdPegasusConfig(vocab_size=256, encoder_layers=2, encoder_ffn_dim=128, encoder_attention_heads=4,
    decoder_layers=2, decoder_ffn_dim=128, decoder_attention_heads=4, d_model=64)
BACKEND = 'eager'


def tiny_model():
    torch.manual_seed(0)
    return BigBirdPegasusForConditionalGeneration(CONFIG).eval()


# The inputs compile_prefill fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[2, 123, 191], [2, 116, 17]], dtype=torch.int64),
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
