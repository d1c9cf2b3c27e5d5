"""[aoti_generate] export fails at run: index out of bounds: # <= tmp9 < 16L: Molmo2ForConditionalGeneration
(aoti_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-9318808c.py
The suite saw: run: part vision: RuntimeError: index out of bounds: 0 <= tmp9 < 16L
Shared by 1 class(es), 1 cell(s) of 1 check(s) (index.json lists them).
"""

import os
import tempfile

import torch
from transformers import (Molmo2AdapterConfig, Molmo2Config, Molmo2ForConditionalGeneration, Molmo2TextConfig,
    Molmo2VisionConfig)

CONFIG = Molmo2Config(
    vision_config=Molmo2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16, image_size=[32, 32], patch_size=8,
        num_position_embeddings=16),
    adapter_config=Molmo2AdapterConfig(vision_feature_layer=[1, 0], hidden_size=64, num_attention_heads=4,
        num_key_value_heads=4, head_dim=16, intermediate_size=128, text_hidden_size=64),
    text_config=Molmo2TextConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        vocab_size=256, num_hidden_layers=2, intermediate_size=128, rope_scaling_layers=[0, 1]),
    image_start_token_id=250, low_res_image_start_token_id=253, image_end_token_id=251, image_patch_id=252,
    frame_start_token_id=254, frame_end_token_id=255)


def tiny_model():
    torch.manual_seed(0)
    return Molmo2ForConditionalGeneration(CONFIG).eval()


# The inputs aoti_generate fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[153, 99, 85, 52, 250] + [252] * 4 + [251, 6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.full((1, 15), 1, dtype=torch.int64),
    'pixel_values': torch.randn((1, 16, 192), generator=g, dtype=torch.float32),
    'image_token_pooling': torch.tensor([[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15], [16, 17, 20, 21],
        [18, 19, 22, 23], [24, 25, 28, 29], [26, 27, 30, 31]], dtype=torch.int64),
    'image_grids': torch.tensor([[2, 2, 0, 0]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 5 + [1] * 4 + [0] * 6], dtype=torch.int64),
}

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


def export_part(module, args=(), kwargs=None):
    """torch.export.export(strict=False) of one generation part."""
    with torch.no_grad():
        return torch.export.export(module, args, kwargs or {}, strict=False)


def serve_fresh(package, inputs):
    """The AOTInductor package loaded and called in a fresh interpreter that imports torch only, as a C++ server
    has no Python model; its output, or RuntimeError("<load|run>: <the first line of the error it reported>")."""
    import subprocess
    import sys

    folder = os.path.dirname(package)
    torch.save(inputs, os.path.join(folder, "inputs.pt"))
    code = ("import sys, torch\nprint('load', flush=True)\ntry:\n"
            "    runner = torch._inductor.aoti_load_package(sys.argv[1])\n    print('run', flush=True)\n"
            "    with torch.no_grad():\n        torch.save(runner(**torch.load(sys.argv[2])), sys.argv[2] + '.out')\n"
            "except Exception as exc:\n    sys.exit((str(exc).splitlines() or [type(exc).__name__])[0])\n")
    done = subprocess.run([sys.executable, "-I", "-c", code, package, os.path.join(folder, "inputs.pt")],
                          capture_output=True, text=True, env={**os.environ, "AOTI_RUNTIME_CHECK_INPUTS": "1"})
    if done.returncode:  # the exception's first line, or what a C++ exception that ended the process said
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        said = [line.split("what():", 1)[1].strip() for line in lines if "what():" in line]
        raise RuntimeError(f"{done.stdout.split()[-1]}: {said[-1] if said else lines[-1]}")
    return torch.load(os.path.join(folder, "inputs.pt.out"))


model = tiny_model()
media = {k: inputs[k] for k in ['image_grids', 'image_token_pooling', 'pixel_values']}
program = export_part(VisionPart(model), kwargs=media)
package = os.path.join(tempfile.mkdtemp(), "model.pt2")
torch._inductor.aoti_compile_and_package(program, package_path=package)
serve_fresh(package, media)  # in a fresh interpreter that imports torch only
