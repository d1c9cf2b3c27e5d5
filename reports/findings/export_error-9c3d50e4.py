# Standalone reproducer of findings group export_error-9c3d50e4: export_error at transformers.models.csm.modeling_csm:CsmBackboneModelEmbeddings.forward
#
# Seen with transformers 5.24.0, torch 2.13.0+cpu, cpu / float32 / backend eager. Needs only torch and
#   transformers (ONNX checks: onnxruntime too); no weights, no network.
# Fingerprint the suite recorded: {"error": "RuntimeError", "kind": "export_error", "what": "export of part
#   embed_prefill", "where": "transformers.models.csm.modeling_csm:CsmBackboneModelEmbeddings.forward"}
# Covers 1 class(es), 2 cell(s): CsmForConditionalGeneration; checks: executorch (1), export_generate (1).
# Cells: CsmForConditionalGeneration (executorch, export_generate).
# This script: CsmForConditionalGeneration / export_generate (a tiny random CsmForConditionalGeneration from the
#   config below, the inputs the check fed, the check's steps up to the failure).
#
# Diagnosis: export_error at `transformers.models.csm.modeling_csm:CsmBackboneModelEmbeddings.forward` (site in
#   transformers); raising RuntimeError. The suite's message, masked: export of part 'embed_prefill' with
#   input_ids dynamic failed: RuntimeError: The size of tensor a (s70) must match the size of tensor b (#) at
#   non-singleton dimension #) (at transformers/models/csm/modeling_csm.py:#)
#
# Run: python this_file.py. The last line it prints is REPRO-RESULT {json}: the failure's fingerprint by the
#   suite's rules (raised: false when nothing failed).

import inspect
import os
import sys
import tempfile

import torch
import transformers
from transformers import CsmForConditionalGeneration
from transformers import CsmConfig

CONFIG = {
    'output_hidden_states': False,
    'return_dict': True,
    'dtype': None,
    'chunk_size_feed_forward': 0,
    'is_encoder_decoder': False,
    'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
    'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
    'problem_type': None,
    'num_codebooks': 32,
    'vocab_size': 256,
    'text_vocab_size': 256,
    'hidden_size': 64,
    'intermediate_size': 128,
    'num_hidden_layers': 2,
    'num_attention_heads': 4,
    'num_key_value_heads': 2,
    'hidden_act': 'silu',
    'max_position_embeddings': 2048,
    'initializer_range': 0.02,
    'rms_norm_eps': 1e-05,
    'use_cache': True,
    'pad_token_id': 254,
    'codebook_pad_token_id': 252,
    'codebook_eos_token_id': 0,
    'bos_token_id': 253,
    'eos_token_id': None,
    'audio_token_id': 254,
    'audio_eos_token_id': 255,
    'rope_parameters': {'rope_theta': 500000.0, 'rope_type': 'default'},
    'attention_bias': False,
    'attention_dropout': 0.0,
    'mlp_bias': False,
    'head_dim': 16,
    'tie_codebooks_embeddings': True,
    'depth_decoder_config': {
        'architectures': None,
        'output_hidden_states': False,
        'return_dict': True,
        'dtype': None,
        'chunk_size_feed_forward': 0,
        'is_encoder_decoder': False,
        'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
        'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
        'problem_type': None,
        'num_codebooks': 32,
        'backbone_hidden_size': 64,
        'vocab_size': 256,
        'hidden_size': 64,
        'intermediate_size': 128,
        'num_hidden_layers': 2,
        'num_attention_heads': 4,
        'num_key_value_heads': 2,
        'hidden_act': 'silu',
        'max_position_embeddings': 33,
        'initializer_range': 0.02,
        'rms_norm_eps': 1e-05,
        'use_cache': True,
        'pad_token_id': None,
        'bos_token_id': None,
        'eos_token_id': None,
        'rope_parameters': {'rope_theta': 500000.0, 'rope_type': 'default'},
        'attention_bias': False,
        'attention_dropout': 0.0,
        'mlp_bias': False,
        'head_dim': 16,
        '_name_or_path': '',
        'model_type': 'csm_depth_decoder_model',
        'output_attentions': False,
    },
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
    'tie_word_embeddings': True,
    'model_type': 'csm',
    'output_attentions': False,
}
MAX_LEN = 17
NEW_TOKENS = 8
ATOL = 0.0001
RTOL = 1.3e-06


def tiny_model():
    """A fresh tiny CsmForConditionalGeneration with the suite's deterministic random weights (seed 0; weights left all
    zero by the initialisation get small random values, so that every input path shows in the logits)."""
    torch.manual_seed(0)
    model = CsmForConditionalGeneration(CsmConfig.from_dict(CONFIG))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


def sample_inputs():
    """The inputs export_generate fed (token ids literal, media seeded random: see the header)."""
    g = torch.Generator().manual_seed(0)
    return {
        'input_ids': torch.tensor([[37, 107, 92, 39, 189, 180, 10, 29, 23]], dtype=torch.int64),
        'attention_mask': torch.full((1, 9), 1, dtype=torch.int64),
    }


# --- the check's pieces (vlm-conformance's rules, restated) ---

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


def static_cache(config, max_len, batch_size):
    """The StaticCache generate makes for cache_implementation="static" (the decoder's text config)."""
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kwargs = {"config": config, "max_cache_len": max_len}
    for name in ("max_batch_size", "batch_size"):
        if name in params:
            kwargs[name] = batch_size
    return StaticCache(**kwargs)


def full_static_layers(cache, max_len):
    """Each sliding-window layer whose window holds the whole generation made a plain StaticLayer."""
    from transformers.cache_utils import StaticLayer, StaticSlidingWindowLayer

    for i, layer in enumerate(getattr(cache, "layers", [])):
        if isinstance(layer, StaticSlidingWindowLayer) and layer.max_cache_len >= max_len:
            cache.layers[i] = StaticLayer(max_len)
    return cache


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
        # transformers' exporters read `model.config` of what they export (their input preparers for NaViT-style
        # encoders do), as its own components, PreTrainedModels, have it: the part carries its model's.
        self.config = model.config

    def forward(self, **media):
        return image_features(self.model.get_image_features(**media))


class EmbedPart(torch.nn.Module):
    """The text embedding."""

    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, input_ids):
        return self.embedding(input_ids)


class DecoderPart(torch.nn.Module):
    """The decoder and its head over `inputs_embeds` and a StaticCache of `max_len` tokens (batch 1): without
    `cache_tensors` (the prefill) a fresh cache, returning the last logits and the cache tensors (keys, values,
    length per layer); with them (a step) they back the cache, updated in place; returns the last logits."""

    def __init__(self, owner, max_len, cache_kwarg, text_config):
        super().__init__()
        self.owner, self.max_len, self.cache_kwarg, self.text_config = owner, max_len, cache_kwarg, text_config

    def forward(self, inputs_embeds, cache_tensors=None, **text):
        cache = full_static_layers(static_cache(self.text_config, self.max_len, 1), self.max_len)
        layers = [layer for layer in cache.layers if hasattr(layer, "lazy_initialization")]
        if cache_tensors is not None:
            for layer, i in zip(layers, range(0, len(cache_tensors), 3)):
                keys, values, length = cache_tensors[i:i + 3]
                layer.keys, layer.values, layer.cumulative_length = keys, values, length
                layer.device = keys.device
                layer.batch_size, layer.num_heads = keys.shape[:2]
                layer.k_head_dim, layer.v_head_dim = keys.shape[-1], values.shape[-1]
                layer.is_initialized = True
        else:
            for layer in layers:
                layer.cumulative_length = inputs_embeds.new_zeros((), dtype=torch.long)
        output = self.owner(inputs_embeds=inputs_embeds, use_cache=True, **{self.cache_kwarg: cache}, **text)
        logits = logits_of(output)[:, -1, :]
        if cache_tensors is not None:
            return logits
        return (logits, *[t for layer in layers for t in (layer.keys, layer.values, layer.cumulative_length)])


def export_part(module, args=(), kwargs=None):
    """torch.export.export(strict=False) of one generation part (export_generate)."""
    with torch.no_grad(), failing_as("export_error"):
        return torch.export.export(module, args, kwargs or {}, strict=False)


def reproduce():
    """export_generate: the steps up to the failure."""
    inputs = sample_inputs()  # batch 1: the sample's second prompt, its padding removed
    model = tiny_model()
    owner = model  # the module generate decodes with
    placeholders = torch.zeros_like(inputs["input_ids"], dtype=torch.bool)
    ids = inputs["input_ids"].masked_fill(placeholders, 0)
    media = {k: inputs[k] for k in []}
    text = {k: inputs[k] for k in ['attention_mask']}
    embedding = EmbedPart(owner.get_input_embeddings())
    decoder = DecoderPart(owner, MAX_LEN, 'cache', owner.config.get_text_config(decoder=True))
    programs = {}
    programs['embed_prefill'] = export_part(embedding, (ids,))


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
