"""[torch.compile] graph break under fullgraph at transformers.models.led.modeling_led:LEDEncoder._pad_to_window_size:
LEDForConditionalGeneration (compile_prefill).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python graph_break-b6e278d5.py
The suite saw: fullgraph compile failed: Unsupported: logging.Logger method not supported for non-export cases:
logging.Logger methods are not supported for non-export cases. (at transformers/models/led/modeling_led.py:132 ...
Shared by 1 class(es), 6 cell(s) of 6 check(s) (index.json lists them).
"""

import torch
from transformers import LEDConfig, LEDForConditionalGeneration

CONFIG = LEDConfig(vocab_size=256, encoder_layers=2, encoder_ffn_dim=128, encoder_attention_heads=4,
    decoder_layers=2, decoder_ffn_dim=128, decoder_attention_heads=4, d_model=64, attention_window=[512, 512])
BACKEND = 'eager'


def tiny_model():
    torch.manual_seed(0)
    return LEDForConditionalGeneration(CONFIG).eval()


# The inputs compile_prefill fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[1, 1, 1, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[2, 123, 191], [2, 116, 17]], dtype=torch.int64),
}

compiled = torch.compile(tiny_model(), fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # compiled before any eager call on this instance
