"""[ONNX] wrong numbers at prefill: Dots3NoteForConditionalGeneration (onnx_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32); needs onnxruntime too. Run: python
numerical_mismatch-c83fb278.py
The suite saw: prefill of the exported parts vs eager generate: logits differ by 0.000475 > 0.0001 (the same parts
run eagerly agree with generate)
Shared by 1 class(es), 1 cell(s) of 1 check(s) (index.json lists them).
"""

import os
import tempfile

import torch
from transformers import (Dots3NoteAudioConfig, Dots3NoteConfig, Dots3NoteForConditionalGeneration, Dots3NoteTextConfig,
    Dots3NoteVisionConfig)

CONFIG = Dots3NoteConfig(
    text_config=Dots3NoteTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
        moe_intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        n_routed_experts=4, kv_lora_rank=32, q_lora_rank=32, qk_rope_head_dim=8, v_head_dim=16, qk_nope_head_dim=8,
        num_experts_per_tok=2, pad_token_id=251, bos_token_id=250, eos_token_id=253,
        rope_parameters={
            'indexed_attention': {'rope_type': 'default', 'rope_theta': 80000000.0, 'partial_rotary_factor': 0.5},
            'sliding_attention': {'rope_type': 'default', 'rope_theta': 50000.0, 'partial_rotary_factor': 0.5},
        },
        mlp_layer_types=['dense', 'sparse'], index_head_dim=16, index_n_heads=4, head_dim=16,
        layer_types=['indexed_attention', 'sliding_attention'], shared_experts_intermediate_size=128,
        per_layer_config={}),
    vision_config=Dots3NoteVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, patch_size=8, moe_intermediate_size=128, mlp_layer_types=['dense', 'sparse'],
        num_local_experts=4, adapter_in_dim=64, adapter_out_dim=64, per_layer_config={}),
    audio_config=Dots3NoteAudioConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, downsample_hidden_size=64, head_dim=16, adapter_input_size=64,
        adapter_out_dim=64, conv_output_size=7680),
    image_token_id=252, video_token_id=254, audio_token_id=255)
ATOL = 0.0001
RTOL = 1.3e-06


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = Dots3NoteForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


# The inputs onnx_generate fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[153, 99, 85, 52] + [252] * 4 + [6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.full((1, 13), 1, dtype=torch.int64),
    'pixel_values': torch.randn((16, 192), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4]], dtype=torch.int64),
}


def close(actual, expected, atol, rtol):
    """(within, "<diff> > <allowed>" at the worst element): |actual - expected| <= atol + rtol * |expected|
    elementwise, equal entries (two equal infinities too) differ by 0, NaN is beyond any tolerance."""
    if actual.shape != expected.shape:
        raise AssertionError(f"logits shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if not actual.numel():
        return True, ""
    a, e = actual.detach().double().flatten(), expected.detach().double().flatten()
    delta, allowed = torch.where(a == e, torch.zeros_like(a), (a - e).abs()), atol + rtol * e.abs()
    ratios = delta / allowed
    worst = int(ratios.isnan().nonzero()[0]) if ratios.isnan().any() else int(ratios.argmax())
    return bool(ratios[worst] <= 1.0), f"{float(delta[worst]):.3g} > {float(allowed[worst]):.3g}"


def image_features(output):
    """Features as [tokens, hidden]: `pooler_output`, a tensor, or a list of them."""
    pooled = getattr(output, "pooler_output", None)
    if isinstance(pooled, (torch.Tensor, list, tuple)):
        output = pooled
    elif not isinstance(output, (torch.Tensor, list, tuple)) and hasattr(output, "last_hidden_state"):
        output = output.last_hidden_state
    if isinstance(output, (list, tuple)):
        return torch.cat([image_features(o) for o in output], dim=0)
    return output.reshape(-1, output.shape[-1])


class VisionPart(torch.nn.Module):
    """Vision encoder + projector: media -> the placeholder features [tokens, hidden]."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.config = model.config  # transformers' exporters read the config of what they export

    def forward(self, **media):
        return image_features(self.model.get_image_features(**media))


def leaf_feed(kwargs, prefix=""):
    """Tensor leaves of keyword inputs by dotted path (``name``, ``name.0``, ...): the ONNX graph's input names."""
    feed = {}
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            feed[f"{prefix}{key}"] = value
        elif isinstance(value, (list, tuple, dict)):
            feed.update(leaf_feed(value if isinstance(value, dict) else dict(enumerate(value)), f"{prefix}{key}."))
    return feed


def onnx_export(module, kwargs, path):
    """`module(**kwargs)` to an ONNX file with transformers' OnnxExporter; the feed (input name -> tensor)."""
    from transformers.exporters import OnnxConfig, OnnxExporter

    with torch.no_grad():
        exported = OnnxExporter().export(module, kwargs, OnnxConfig())  # adds the inputs it precomputes
        OnnxExporter.save_program(exported.program, path)
    return leaf_feed(kwargs)


class OrtProgram:
    """An ONNX file in an ONNX Runtime CPU session: `program(feed) -> {output name: tensor}`."""

    def __init__(self, path):
        import onnxruntime as ort

        self.session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])

    def __call__(self, feed):
        # transformers' exporter prefixes an input it also returns (a mutated one) with `input.`
        arrays = {spec.name: feed[spec.name.removeprefix("input.")].detach().contiguous().numpy()
                  for spec in self.session.get_inputs()}
        values = self.session.run(None, arrays)
        return {spec.name: torch.from_numpy(value) for spec, value in zip(self.session.get_outputs(), values)}


model = tiny_model()
sessions = {}

def onnx_part(name, module, kwargs):
    path = os.path.join(tempfile.mkdtemp(prefix=f"{name}-"), "model.onnx")
    feed = onnx_export(module, kwargs, path)
    sessions[name] = OrtProgram(path)
    expected = module(**kwargs)  # the part alone: ONNX Runtime against the same module run eagerly
    expected = expected[0] if isinstance(expected, tuple) else expected
    within, beyond = close(next(iter(sessions[name](feed).values())), expected, ATOL, RTOL)
    if not within:
        raise AssertionError(f"prefill of the exported parts: part {name!r} in ONNX Runtime differs from the "
                             f"same part run eagerly by {beyond}")

onnx_part('vision', VisionPart(model.model), {k: inputs[k] for k in ['image_grid_thw', 'pixel_values']})
