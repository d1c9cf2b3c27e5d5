"""[torch.compile] compile verdict depends on an earlier eager call at
transformers.models.chameleon.modeling_chameleon:ChameleonImageVocabularyMapping.convert_img2bpe:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python call_order-f0a29b3b.py
The suite saw: call order changes the verdict: compiled before any eager call: fullgraph compile failed:
Unsupported: Unsupported context manager: Dynamo does not know how to enter a `RLock` context manager. (at ...
Shared by 1 class(es), 6 cell(s) of 6 check(s) (index.json lists them).
"""

import torch
from transformers import ChameleonConfig, ChameleonForConditionalGeneration, ChameleonVQVAEConfig

CONFIG = ChameleonConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=4,
    vq_config=ChameleonVQVAEConfig(embed_dim=64, num_embeddings=64, latent_channels=64, base_channels=64,
        channel_multiplier=[1, 1, 1, 1, 1], num_res_blocks=1),
    vocabulary_map={
        '<image>': 200, 'IMGIMGAZ': 100, 'IMGIMGBZ': 101, 'IMGIMGCZ': 102, 'IMGIMGDZ': 103, 'IMGIMGEZ': 104,
        'IMGIMGFZ': 105, 'IMGIMGGZ': 106, 'IMGIMGHZ': 107, 'IMGIMGIZ': 108, 'IMGIMGJZ': 109, 'IMGIMGBAZ': 110,
        'IMGIMGBBZ': 111, 'IMGIMGBCZ': 112, 'IMGIMGBDZ': 113, 'IMGIMGBEZ': 114, 'IMGIMGBFZ': 115, 'IMGIMGBGZ': 116,
        'IMGIMGBHZ': 117, 'IMGIMGBIZ': 118, 'IMGIMGBJZ': 119, 'IMGIMGCAZ': 120, 'IMGIMGCBZ': 121, 'IMGIMGCCZ': 122,
        'IMGIMGCDZ': 123, 'IMGIMGCEZ': 124, 'IMGIMGCFZ': 125, 'IMGIMGCGZ': 126, 'IMGIMGCHZ': 127, 'IMGIMGCIZ': 128,
        'IMGIMGCJZ': 129, 'IMGIMGDAZ': 130, 'IMGIMGDBZ': 131, 'IMGIMGDCZ': 132, 'IMGIMGDDZ': 133, 'IMGIMGDEZ': 134,
        'IMGIMGDFZ': 135, 'IMGIMGDGZ': 136, 'IMGIMGDHZ': 137, 'IMGIMGDIZ': 138, 'IMGIMGDJZ': 139, 'IMGIMGEAZ': 140,
        'IMGIMGEBZ': 141, 'IMGIMGECZ': 142, 'IMGIMGEDZ': 143, 'IMGIMGEEZ': 144, 'IMGIMGEFZ': 145, 'IMGIMGEGZ': 146,
        'IMGIMGEHZ': 147, 'IMGIMGEIZ': 148, 'IMGIMGEJZ': 149, 'IMGIMGFAZ': 150, 'IMGIMGFBZ': 151, 'IMGIMGFCZ': 152,
        'IMGIMGFDZ': 153, 'IMGIMGFEZ': 154, 'IMGIMGFFZ': 155, 'IMGIMGFGZ': 156, 'IMGIMGFHZ': 157, 'IMGIMGFIZ': 158,
        'IMGIMGFJZ': 159, 'IMGIMGGAZ': 160, 'IMGIMGGBZ': 161, 'IMGIMGGCZ': 162, 'IMGIMGGDZ': 163,
    },
    image_token_id=200)
BACKEND = 'eager'


def tiny_model():
    torch.manual_seed(0)
    return ChameleonForConditionalGeneration(CONFIG).eval()


# The inputs compile_prefill fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174] + [200] * 4 + [108, 164, 68, 44], [0, 0, 0, 153, 99, 85,
        52] + [200] * 4 + [6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 13, [0, 0, 0] + [1] * 13], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
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
