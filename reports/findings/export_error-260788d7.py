"""[aoti_forward] export fails at run: expected size #==#, stride #==# at dim=#; expected size #==#, stride #==# at
dim=#; expected size #==#, stride #==# at dim=#: Idefics2ForConditionalGeneration (aoti_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-260788d7.py
The suite saw: run: call traced: RuntimeError: expected size 64==64, stride 1==16 at dim=1; expected size 4==4,
stride 256==4 at dim=2; expected size 4==4, stride 64==1 at dim=3
Shared by 4 class(es), 8 cell(s) of 2 check(s) (index.json lists them).
"""

import inspect
import os
import tempfile

import torch
from transformers import (Idefics2Config, Idefics2ForConditionalGeneration, Idefics2PerceiverConfig,
    Idefics2VisionConfig, MistralConfig)
from torch.export import Dim

CONFIG = Idefics2Config(image_token_id=255,
    vision_config=Idefics2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8),
    perceiver_config=Idefics2PerceiverConfig(hidden_size=64, resampler_depth=2, resampler_n_heads=4,
        resampler_head_dim=16, num_key_value_heads=2),
    text_config=MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=32768,
        rms_norm_eps=1e-05, pad_token_id=0))
CONSTANTS = {'use_cache': False}
DYNAMIC = {'attention_mask': [1], 'input_ids': [1]}


def tiny_model():
    torch.manual_seed(0)
    return Idefics2ForConditionalGeneration(CONFIG).eval()


# The inputs aoti_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174] + [255] * 64 + [108, 164, 68, 44], [0, 0, 0, 153, 99,
        85, 52] + [255] * 64 + [6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 73, [0, 0, 0] + [1] * 73], dtype=torch.int64),
    'pixel_values': torch.randn((2, 1, 3, 32, 32), generator=g, dtype=torch.float32),
    'pixel_attention_mask': torch.full((2, 1, 32, 32), True, dtype=torch.bool),
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


class LogitsModule(torch.nn.Module):
    """`forward(**tensors)` -> the logits of `model(**tensors, **constants)`: the module exported."""

    def __init__(self, model, constants):
        super().__init__()
        self.model = model
        self.constants = constants

    def forward(self, **tensors):
        return logits_of(self.model(**tensors, **self.constants))


class NamedLogitsModule(LogitsModule):
    """`LogitsModule` whose forward names its tensor inputs (for a dynamic_shapes spec by name)."""

    def __init__(self, model, names, constants):
        super().__init__(model, constants)

        def forward(**tensors):
            return LogitsModule.forward(self, **tensors)

        forward.__signature__ = inspect.Signature(
            [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in names])
        self.forward = forward


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


shapes = {name: ({d: Dim.AUTO for d in DYNAMIC[name]} if name in DYNAMIC else None) for name in inputs}
module = NamedLogitsModule(tiny_model(), list(inputs), CONSTANTS)
with torch.no_grad():
    program = torch.export.export(module, (), kwargs=inputs, dynamic_shapes=shapes, strict=False)
package = os.path.join(tempfile.mkdtemp(), "model.pt2")
torch._inductor.aoti_compile_and_package(program, package_path=package)
serve_fresh(package, inputs)  # in a fresh interpreter that imports torch only
