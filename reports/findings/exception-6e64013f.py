# Standalone reproducer of findings group exception-6e64013f: exception at transformers.models.kyutai_speech_to_text.modeling_kyutai_speech_to_text:KyutaiSpeechToTextForConditionalGeneration.generate
#
# Seen with transformers 5.24.0, torch 2.13.0+cpu, cpu / float32 / backend inductor. Needs only torch and
#   transformers (ONNX checks: onnxruntime too); no weights, no network.
# Fingerprint the suite recorded: {"error": "AttributeError", "kind": "exception", "where":
#   "transformers.models.kyutai_speech_to_text.modeling_kyutai_speech_to_text:KyutaiSpeechToTextForConditionalGeneration.generate"}
# Covers 1 class(es), 4 cell(s): KyutaiSpeechToTextForConditionalGeneration; checks: compile_decode (1),
#   compile_decode@inductor (1), export_static_cache (1), static_cache (1).
# Cells: KyutaiSpeechToTextForConditionalGeneration (compile_decode, compile_decode@inductor, export_static_cache,
#   static_cache).
# This script: KyutaiSpeechToTextForConditionalGeneration / compile_decode@inductor (a tiny random
#   KyutaiSpeechToTextForConditionalGeneration from the config below, the inputs the check fed, the check's steps
#   up to the failure).
#
# Diagnosis: exception at
#   `transformers.models.kyutai_speech_to_text.modeling_kyutai_speech_to_text:KyutaiSpeechToTextForConditionalGeneration.generate`
#   (site in transformers); raising AttributeError. The suite's message, masked: AttributeError: 'NoneType' object
#   has no attribute 'shape' (at transformers/models/kyutai_speech_to_text/modeling_kyutai_speech_to_text.py:#)
#
# Note: eager greedy generate itself raises, before anything is compiled
# Run: python this_file.py. The last line it prints is REPRO-RESULT {json}: the failure's fingerprint by the
#   suite's rules (raised: false when nothing failed).

import inspect
import os
import sys
import tempfile

import torch
import transformers
from transformers import KyutaiSpeechToTextForConditionalGeneration
from transformers import KyutaiSpeechToTextConfig

CONFIG = {
    'output_hidden_states': False,
    'return_dict': True,
    'dtype': None,
    'chunk_size_feed_forward': 0,
    'is_encoder_decoder': False,
    'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
    'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
    'problem_type': None,
    'codebook_vocab_size': 64,
    'vocab_size': 256,
    'hidden_size': 64,
    'num_hidden_layers': 2,
    'num_attention_heads': 4,
    'num_key_value_heads': 4,
    'max_position_embeddings': 750,
    'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'default'},
    'hidden_act': 'silu',
    'head_dim': 16,
    'initializer_range': 0.02,
    'use_cache': True,
    'sliding_window': 375,
    'attention_dropout': 0.0,
    'ffn_dim': 128,
    'rms_norm_eps': 1e-08,
    'num_codebooks': 32,
    'audio_bos_token_id': 63,
    'audio_pad_token_id': 2304,
    'tie_word_embeddings': False,
    'pad_token_id': 3,
    'bos_token_id': 254,
    'eos_token_id': None,
    'codec_config': {
        'architectures': None,
        'output_hidden_states': False,
        'return_dict': True,
        'dtype': None,
        'chunk_size_feed_forward': 0,
        'is_encoder_decoder': False,
        'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
        'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
        'problem_type': None,
        'sampling_rate': 24000,
        'audio_channels': 1,
        'hidden_size': 64,
        'num_filters': 4,
        'num_residual_layers': 1,
        'upsampling_ratios': [8, 6, 5, 4],
        'kernel_size': 7,
        'last_kernel_size': 3,
        'residual_kernel_size': 3,
        'dilation_growth_rate': 2,
        'use_causal_conv': True,
        'pad_mode': 'constant',
        'compress': 2,
        'trim_right_ratio': 1.0,
        'codebook_size': 64,
        'codebook_dim': 256,
        'num_quantizers': 32,
        'use_conv_shortcut': False,
        'vector_quantization_hidden_dimension': 64,
        'num_semantic_quantizers': 1,
        'upsample_groups': 64,
        'num_hidden_layers': 2,
        'intermediate_size': 128,
        'num_attention_heads': 4,
        'num_key_value_heads': 4,
        'head_dim': 16,
        'hidden_act': 'gelu',
        'max_position_embeddings': 8000,
        'initializer_range': 0.02,
        'norm_eps': 1e-05,
        'use_cache': False,
        'use_streaming': False,
        'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'default'},
        'sliding_window': 250,
        'attention_dropout': 0.0,
        'layer_scale_initial_scale': 0.01,
        'attention_bias': False,
        'tie_word_embeddings': True,
        '_frame_rate': None,
        '_name_or_path': '',
        'model_type': 'mimi',
        'output_attentions': False,
    },
    'frame_size': 1920,
    'model_type': 'kyutai_speech_to_text',
    'output_attentions': False,
}
BACKEND = 'inductor'
ATOL = 0.0001
RTOL = 1.3e-06
NEW_TOKENS = 5


def tiny_model():
    """A fresh tiny KyutaiSpeechToTextForConditionalGeneration with the suite's deterministic random weights (seed 0; weights left all
    zero by the initialisation get small random values, so that every input path shows in the logits)."""
    torch.manual_seed(0)
    model = KyutaiSpeechToTextForConditionalGeneration(KyutaiSpeechToTextConfig.from_dict(CONFIG))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


def sample_inputs():
    """The inputs compile_decode fed (token ids literal, media seeded random: see the header)."""
    g = torch.Generator().manual_seed(0)
    return {
        'input_ids': torch.tensor([[[3] + [2304] * 32, [3] + [2304] * 32, [3] + [2304] * 32, [33, 34, 10, 46, 54, 44, 56, 15, 12, 37, 11, 18, 9, 32, 30, 62, 2, 53, 2, 53, 32, 43, 17, 15, 18, 1, 0, 53, 33, 10, 60, 10, 44], [58, 8, 25, 11, 21, 7, 61, 55, 32, 40, 25, 32, 61, 13, 11, 59, 40, 17, 5, 50, 4, 2, 2, 31, 58, 27, 51, 22, 14, 49, 7, 17, 4], [57, 35, 47, 15, 52, 18, 5, 39, 4, 19, 26, 59, 62, 5, 52, 48, 2, 1, 61, 52, 29, 49, 31, 28, 10, 19, 59, 52, 61, 53, 1, 59, 12], [125, 28, 39, 44, 6, 15, 5, 44, 17, 11, 16, 41, 29, 58, 60, 52, 39, 37, 24, 60, 46, 1, 34, 49, 26, 1, 19, 7, 43, 28, 25, 34, 16], [108, 14, 58, 32, 20, 30, 4, 42, 22, 12, 48, 45, 10, 12, 11, 34, 16, 39, 31, 27, 7, 44, 28, 53, 23, 11, 38, 37, 35, 50, 20, 8, 21], [74, 30, 15, 49, 58, 30, 46, 47, 57, 60, 30, 49, 41, 7, 46, 45, 36, 6, 45, 33, 8, 38, 14, 11, 30, 26, 23, 0, 21, 53, 52, 11, 13]], [[46, 56, 29, 9, 41, 20, 4, 30, 15, 27, 53, 45, 3, 50, 9, 59, 35, 27, 4, 49, 47, 24, 61, 61, 36, 27, 43, 16, 57, 57, 33, 28, 59], [33, 4, 22, 58, 40, 52, 27, 44, 50, 20, 25, 54, 9, 21, 55, 21, 55, 28, 19, 57, 23, 2, 42, 24, 19, 33, 34, 22, 31, 7, 50, 4, 26], [23, 48, 17, 61, 19, 56, 28, 5, 39, 46, 10, 12, 59, 26, 41, 5, 0, 22, 61, 15, 38, 39, 12, 10, 60, 48, 20, 30, 34, 58, 18, 23, 2], [193, 40, 48, 15, 44, 45, 56, 38, 11, 1, 42, 55, 62, 41, 23, 48, 13, 44, 48, 10, 51, 27, 33, 16, 33, 52, 36, 37, 3, 50, 49, 25, 29], [65, 17, 58, 48, 4, 18, 11, 46, 27, 52, 59, 39, 22, 22, 56, 51, 9, 40, 23, 17, 4, 8, 30, 17, 30, 53, 17, 37, 9, 39, 6, 7, 48], [141, 19, 56, 29, 29, 56, 22, 45, 26, 51, 25, 23, 22, 27, 33, 59, 46, 1, 38, 50, 38, 53, 11, 36, 37, 20, 3, 12, 15, 10, 0, 18, 49], [58, 49, 20, 53, 21, 62, 32, 57, 13, 14, 46, 16, 62, 39, 13, 12, 30, 19, 5, 1, 58, 49, 35, 46, 1, 17, 12, 62, 59, 32, 21, 25, 61], [193, 28, 46, 27, 35, 37, 39, 17, 26, 32, 28, 29, 18, 56, 36, 55, 44, 22, 25, 7, 38, 28, 19, 46, 34, 39, 35, 34, 58, 56, 5, 55, 32], [27, 9, 54, 37, 62, 17, 37, 23, 38, 39, 36, 58, 53, 25, 57, 17, 18, 55, 24, 41, 46, 40, 1, 59, 26, 10, 5, 34, 34, 27, 48, 39, 12]]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    }


# --- the check's pieces (vlm-conformance's rules, restated) ---

def greedy(model, inputs, new_tokens, **extra):
    """Greedy generate of exactly `new_tokens` tokens (EOS cannot stop it), generate's auto-compile off."""
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, disable_compile=True, **extra)


def reproduce():
    """compile_decode: the steps up to the failure."""
    inputs = sample_inputs()
    eager = greedy(tiny_model(), inputs, NEW_TOKENS, output_logits=True, return_dict_in_generate=True)


# --- reporting: the failure's fingerprint by the suite's rules ---

import ast
import contextlib
import functools
import json
import re
import sys
import traceback
from pathlib import Path

RESULT = "REPRO-RESULT"
DATA_DEPENDENT = ("Could not guard on data-dependent", "data-dependent expression", "GuardOnDataDependentSymNode",
                  "DataDependentOutputException", "PendingUnbackedSymbolNotFound")
TRANSFORMERS_FILE = re.compile(r'File "([^"]*/transformers/[^"]+)", line (\d+)')
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|\.\d+)(?![\w.])", re.IGNORECASE)
SHAPE = re.compile(r"\((?:\s*[-\w]+\s*,)+\s*[-\w]*\s*\)|\[(?:\s*[-\w]+\s*,)+\s*[-\w]*\s*\]")
BACKEND_PARTS = ("/torch/_inductor/", "/torch/_functorch/")
GENERATED_MARKERS = ("torchinductor_", "<inductor", "codegen(")
WRAPPERS = ("BackendCompilerFailed", "InductorError")


class Finding(AssertionError):
    """The check's own statement about the model: its `kind`, the words its fingerprint keeps (`what`, masked;
    default the message), a failed `guard`, the exception behind it (`cause`: its site and type), and the site the
    check names where no exception has one (`where`: the function that decided, as ``module:qualname``)."""

    def __init__(self, kind, message, what=None, guard="", cause=None, where=""):
        super().__init__(message)
        self.kind, self.what, self.guard, self.cause = kind, message if what is None else what, guard, cause
        self.where = where


@contextlib.contextmanager
def failing_as(default, unsupported="", backend=""):
    """A failure raised inside is of kind `default` unless its words say otherwise (`kind_of`); `unsupported`
    renames an unsupported construct (a compile says graph_break); under a code-generating `backend` a failure
    raised inside it is the backend's (kind backend)."""
    try:
        yield
    except Exception as exc:
        if not hasattr(exc, "repro_as"):
            exc.repro_as = (default, unsupported, backend)
        raise


def mask(text):
    """`text` with numbers and shapes replaced by ``#`` (the suite's `fingerprints.mask`)."""
    return " ".join(NUMBER.sub("#", SHAPE.sub("#", text)).split())


def module_of(filename):
    path = str(Path(filename))
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            path = path.rsplit(marker, 1)[1]
            break
    else:
        roots = sorted((str(Path(p).resolve()) for p in sys.path if p), key=len, reverse=True)
        path = next((path[len(root) + 1:] for root in roots if path.startswith(root + "/")), Path(path).name)
    return re.sub(r"\.py$", "", path).replace("/", ".").removesuffix(".__init__")


@functools.lru_cache(maxsize=256)
def _definitions(filename):
    try:
        tree = ast.parse(Path(filename).read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return ()
    found = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                found.append((child.lineno, child.end_lineno or child.lineno, name))
                walk(child, name + ("." if isinstance(child, ast.ClassDef) else ".<locals>."))
            else:
                walk(child, prefix)

    walk(tree, "")
    return tuple(found)


def site(filename, lineno, function=""):
    """``module:qualname`` of the innermost def or class around `lineno` of `filename`."""
    inside = [name for first, last, name in _definitions(filename) if lineno and first <= lineno <= last]
    name = inside[-1] if inside else (function if function and function != "<module>" else "<module>")
    return f"{module_of(filename)}:{name}"


def site_of(frames):
    frames = list(frames or [])
    if not frames:
        return ""
    frame = ([f for f in frames if "/transformers/" in f.filename] or frames)[-1]
    return site(frame.filename, frame.lineno, frame.name)


def where_of(exc):
    named = TRANSFORMERS_FILE.findall(str(exc))
    if named:
        return site(named[-1][0], int(named[-1][1]))
    stack = getattr(exc, "real_stack", None)
    return site_of(stack) if stack else site_of(traceback.extract_tb(exc.__traceback__))


def kind_of(exc, default="exception"):
    text = f"{type(exc).__name__}: {exc}"
    if any(marker in text for marker in DATA_DEPENDENT):
        return "data_dependent_guard"
    return "unsupported" if type(exc).__name__ == "Unsupported" else default


def guard_site(reason):
    """``<masked guard> @ <module:qualname>`` of one of dynamo's guard-failure reasons."""
    head = next((line.strip() for line in reason.splitlines() if line.strip()), "")
    head = head.split(": ", 1)[1] if re.match(r"^\S+/\S+: ", head) else head
    segments = [part.strip() for part in head.split("  # ")]
    located = next((re.search(r"(\S+\.py):(\d+) in (\w+)", part) for part in segments[1:]
                    if re.search(r"\S+\.py:\d+ in ", part)), None)
    where = site(located.group(1), int(located.group(2)), located.group(3)) if located else "?"
    return f"{mask(segments[0])} @ {where}"


def _chain(exc):
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
    return seen


def _generated(filename):
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
        root = cache_dir()
    except ImportError:
        root = ""
    return any(marker in filename for marker in GENERATED_MARKERS) or bool(root and filename.startswith(root))


def _backend_frames(exc):
    frames = [f for e in _chain(exc) for f in traceback.extract_tb(e.__traceback__)]
    return [f for f in frames if _generated(f.filename) or any(part in f.filename for part in BACKEND_PARTS)]


def backend_fingerprint(exc):
    """Kind backend: the innermost inductor/AOTAutograd frame (generated code as ``<inductor generated code>``),
    the exception the backend's wrapper was raised for, its first line masked."""
    chain = _chain(exc)
    inner = next((e for e in chain if type(e).__name__ not in WRAPPERS), chain[-1])
    frames = _backend_frames(exc)
    where = ""
    if frames:
        frame = frames[-1]
        where = (f"<inductor generated code>:{frame.name}" if _generated(frame.filename)
                 else site(frame.filename, frame.lineno, frame.name))
    message = " ".join((next((l.strip() for l in str(inner).splitlines() if l.strip()), "") or repr(inner)).split())
    message = message[:237] + "..." if len(message) > 240 else message
    return {"kind": "backend", "where": where, "error": type(inner).__name__, "what": mask(message)}


def fingerprint(exc):
    """The suite's fingerprint of a failure the script raised (see the module)."""
    if isinstance(exc, Finding):
        found = {"kind": exc.kind, "guard": guard_site(exc.guard) if exc.guard else "", "where": exc.where}
        if exc.cause is not None:
            found.update(where=where_of(exc.cause), error=type(exc.cause).__name__)
        elif exc.kind in ("contract", "numerical_mismatch"):
            found["what"] = mask(exc.what)
        return {k: v for k, v in found.items() if v}
    default, unsupported, backend = getattr(exc, "repro_as", ("exception", "", ""))
    if backend not in ("", "eager") and (any(type(e).__name__ in WRAPPERS for e in _chain(exc))
                                         or _backend_frames(exc)):
        return backend_fingerprint(exc)
    kind = kind_of(exc, default)
    if kind == "unsupported" and unsupported:
        kind = unsupported
    return {"kind": kind, "where": where_of(exc), "error": type(exc).__name__}


def main(reproduce):
    """Run `reproduce()`; print its fingerprint as the last ``REPRO-RESULT`` line; 1 when it raised, else 0."""
    try:
        reproduce()
    except Exception as exc:
        traceback.print_exc()
        found = {"raised": True, **fingerprint(exc),
                 "message": " ".join(str(exc).split())[:300]}
        print(f"{RESULT} {json.dumps(found, sort_keys=True)}", flush=True)
        return 1
    print("reproduce() returned: the failure did not happen here", file=sys.stderr)
    print(f"{RESULT} {json.dumps({'raised': False})}", flush=True)
    return 0


if __name__ == "__main__":
    print(f"torch {torch.__version__}, transformers {transformers.__version__}", file=sys.stderr)
    sys.exit(main(reproduce))
