"""[transformers.exporters] export fails at transformers.exporters.runners.runner_onnx:OnnxModelRunner.__call__:
HiggsAudioV2ForConditionalGeneration (exporter_onnx_ort_dynamic_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-fc00dbf6.py
The suite saw: run: onnx runner on the sample: RuntimeError: Error in execution: Non-zero status code returned while
running GatherND node. Name:'node_GatherND_97' Status Message: invalid index found, index = 0 (at ...
Shared by 11 class(es), 12 cell(s) of 4 check(s) (index.json lists them).
"""

import torch
from transformers import HiggsAudioV2Config, HiggsAudioV2ForConditionalGeneration
from transformers.exporters import OnnxExporter, OnnxConfig
from transformers.exporters.quantizers import OnnxRuntimeDynamicConfig, OnnxRuntimeQuantizer

CONFIG = HiggsAudioV2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, pad_token_id=251, eos_token_id=252, head_dim=16, codebook_size=64,
    audio_token_id=255, audio_bos_token_id=253, audio_delay_token_id=254, audio_stream_bos_id=249,
    audio_stream_eos_id=250)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return HiggsAudioV2ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_onnx_ort_dynamic_forward fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[251, 251, 251, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
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


def runner_kwargs(runner, owner, inputs):
    """What a runner is called with: the output flags dropped, the exporter's own `precompute_export_inputs`
    applied, only the kwargs its graph was traced with."""
    from transformers.exporters.utils import precompute_export_inputs

    flags = ("use_cache", "output_attentions", "output_hidden_states", "return_dict", "return_loss")
    ready = {key: value for key, value in inputs.items() if key not in flags}
    with torch.no_grad():
        precompute_export_inputs(owner, ready)
    traced, constants = runner.metadata.kwargs, runner.metadata.in_constants
    return {key: value for key, value in ready.items() if key in traced and key not in constants}


model = tiny_model()
quantizer = OnnxRuntimeQuantizer(OnnxRuntimeDynamicConfig())
exporter, config = OnnxExporter(), OnnxConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
runner = exported.to("cpu").runners["model"]
reference = tiny_model()
request = inputs
actual = logits_of(runner(**runner_kwargs(runner, reference, dict(request, **CONSTANTS))))
