# Standalone reproducer of findings group exception-2d60a8c8: exception at transformers.integrations.heterogeneity.configuration_utils:HeterogeneousConfigMixin.__getattribute__
#
# Seen with transformers 5.24.0, torch 2.13.0+cpu, cpu / float32 / backend eager. Needs only torch and
#   transformers (ONNX checks: onnxruntime too); no weights, no network.
# Fingerprint the suite recorded: {"error": "AttributeError", "kind": "exception", "where":
#   "transformers.integrations.heterogeneity.configuration_utils:HeterogeneousConfigMixin.__getattribute__"}
# Covers 3 class(es), 3 cell(s): PI0ForConditionalGeneration, Qwen3OmniMoeForConditionalGeneration,
#   Qwen3OmniMoeTalkerForConditionalGeneration; checks: build (2), export_static_cache (1).
# Cells: PI0ForConditionalGeneration (export_static_cache); Qwen3OmniMoeForConditionalGeneration (build);
#   Qwen3OmniMoeTalkerForConditionalGeneration (build).
# This script: Qwen3OmniMoeForConditionalGeneration / build (a tiny random Qwen3OmniMoeForConditionalGeneration
#   from the config below, the inputs the check fed, the check's steps up to the failure).
#
# Diagnosis: exception at
#   `transformers.integrations.heterogeneity.configuration_utils:HeterogeneousConfigMixin.__getattribute__` (site
#   in transformers); raising AttributeError. The suite's message, masked: the class cannot be built from its own
#   default config (transformers bug): AttributeError: 'Qwen3OmniMoeTalkerTextConfig' object has no attribute
#   'shared_expert_intermediate_size' (at transformers/models/qwen3_omni_moe/modeling_qwen3_omni_moe.py:# in
#   Qwen3OmniMoeTalkerTextSparseMoeBlock.__init__)
#
# Run: python this_file.py. The last line it prints is REPRO-RESULT {json}: the failure's fingerprint by the
#   suite's rules (raised: false when nothing failed).

import sys

import torch
import transformers
from transformers import Qwen3OmniMoeForConditionalGeneration
from transformers import Qwen3OmniMoeConfig

CONFIG = {
    'output_hidden_states': False,
    'return_dict': True,
    'dtype': None,
    'chunk_size_feed_forward': 0,
    'is_encoder_decoder': False,
    'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
    'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
    'problem_type': None,
    'thinker_config': {
        'architectures': None,
        'output_hidden_states': False,
        'return_dict': True,
        'dtype': None,
        'chunk_size_feed_forward': 0,
        'is_encoder_decoder': False,
        'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
        'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
        'problem_type': None,
        'audio_config': {
            'architectures': None,
            'output_hidden_states': False,
            'return_dict': True,
            'dtype': None,
            'chunk_size_feed_forward': 0,
            'is_encoder_decoder': False,
            'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
            'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
            'problem_type': None,
            'num_mel_bins': 16,
            'encoder_layers': 2,
            'encoder_attention_heads': 4,
            'encoder_ffn_dim': 128,
            'd_model': 64,
            'dropout': 0.0,
            'attention_dropout': 0.0,
            'activation_function': 'gelu',
            'activation_dropout': 0.0,
            'scale_embedding': False,
            'initializer_range': 0.02,
            'max_source_positions': 32,
            'n_window': 50,
            'output_dim': 3584,
            'n_window_infer': 800,
            'conv_chunksize': 500,
            'downsample_hidden_size': 64,
            '_name_or_path': '',
            'model_type': 'qwen3_omni_moe_audio_encoder',
            'output_attentions': False,
        },
        'vision_config': {
            'architectures': None,
            'output_hidden_states': False,
            'return_dict': True,
            'dtype': None,
            'chunk_size_feed_forward': 0,
            'is_encoder_decoder': False,
            'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
            'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
            'problem_type': None,
            'depth': 2,
            'hidden_size': 64,
            'hidden_act': 'gelu_pytorch_tanh',
            'intermediate_size': 128,
            'num_heads': 4,
            'in_channels': 3,
            'patch_size': 8,
            'spatial_merge_size': 2,
            'temporal_patch_size': 2,
            'out_hidden_size': 64,
            'num_position_embeddings': 2304,
            'deepstack_visual_indexes': [0, 1],
            'initializer_range': 0.02,
            'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'axial'},
            '_name_or_path': '',
            'model_type': 'qwen3_omni_moe_vision_encoder',
            'output_attentions': False,
        },
        'text_config': {
            'architectures': None,
            'output_hidden_states': False,
            'return_dict': True,
            'dtype': None,
            'chunk_size_feed_forward': 0,
            'is_encoder_decoder': False,
            'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
            'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
            'problem_type': None,
            'vocab_size': 256,
            'hidden_size': 64,
            'intermediate_size': 128,
            'num_hidden_layers': 2,
            'num_attention_heads': 4,
            'num_key_value_heads': 2,
            'hidden_act': 'silu',
            'max_position_embeddings': 32768,
            'initializer_range': 0.02,
            'rms_norm_eps': 1e-06,
            'use_cache': True,
            'rope_parameters': {'rope_theta': 1000000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]},
            'attention_bias': False,
            'sliding_window': None,
            'attention_dropout': 0.0,
            'decoder_sparse_step': 1,
            'moe_intermediate_size': 128,
            'num_experts_per_tok': 2,
            'num_experts': 4,
            'norm_topk_prob': True,
            'output_router_logits': False,
            'router_aux_loss_coef': 0.001,
            'mlp_only_layers': [],
            'pad_token_id': None,
            'bos_token_id': None,
            'eos_token_id': None,
            '_name_or_path': '',
            'model_type': 'qwen3_omni_moe_text',
            'output_attentions': False,
        },
        'position_id_per_seconds': 25,
        'audio_start_token_id': 248,
        'user_token_id': 236,
        'initializer_range': 0.02,
        'tie_word_embeddings': False,
        'audio_token_id': 247,
        'image_token_id': 250,
        'video_token_id': 251,
        '_name_or_path': '',
        'model_type': 'qwen3_omni_moe_thinker',
        'output_attentions': False,
    },
    'talker_config': {
        'architectures': None,
        'output_hidden_states': False,
        'return_dict': True,
        'dtype': None,
        'chunk_size_feed_forward': 0,
        'is_encoder_decoder': False,
        'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
        'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
        'problem_type': None,
        'code_predictor_config': {
            'architectures': None,
            'output_hidden_states': False,
            'return_dict': True,
            'dtype': None,
            'chunk_size_feed_forward': 0,
            'is_encoder_decoder': False,
            'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
            'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
            'problem_type': None,
            'vocab_size': 256,
            'hidden_size': 64,
            'intermediate_size': 128,
            'num_hidden_layers': 2,
            'num_attention_heads': 4,
            'num_key_value_heads': 2,
            'head_dim': 16,
            'hidden_act': 'silu',
            'max_position_embeddings': 32768,
            'initializer_range': 0.02,
            'rms_norm_eps': 1e-06,
            'use_cache': True,
            'tie_word_embeddings': False,
            'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'default'},
            'attention_bias': False,
            'sliding_window': None,
            'max_window_layers': 2,
            'layer_types': ['full_attention', 'full_attention'],
            'attention_dropout': 0.0,
            'pad_token_id': None,
            'bos_token_id': None,
            'eos_token_id': None,
            'num_code_groups': 32,
            '_name_or_path': '',
            'model_type': 'qwen3_omni_moe_talker_code_predictor',
            'output_attentions': False,
        },
        'text_config': {
            'architectures': None,
            'output_hidden_states': False,
            'return_dict': True,
            'dtype': None,
            'chunk_size_feed_forward': 0,
            'is_encoder_decoder': False,
            'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
            'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
            'problem_type': None,
            'vocab_size': 256,
            'hidden_size': 64,
            'intermediate_size': 128,
            'num_hidden_layers': 2,
            'num_attention_heads': 4,
            'num_key_value_heads': 2,
            'hidden_act': 'silu',
            'max_position_embeddings': 32768,
            'initializer_range': 0.02,
            'rms_norm_eps': 1e-06,
            'use_cache': True,
            'tie_word_embeddings': False,
            'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'default'},
            'attention_bias': False,
            'sliding_window': None,
            'attention_dropout': 0.0,
            'decoder_sparse_step': 1,
            'moe_intermediate_size': 128,
            'num_experts_per_tok': 2,
            'num_local_experts': 4,
            'norm_topk_prob': False,
            'output_router_logits': False,
            'router_aux_loss_coef': 0.001,
            'mlp_only_layers': [],
            'pad_token_id': None,
            'bos_token_id': None,
            'eos_token_id': None,
            '_name_or_path': '',
            'model_type': 'qwen3_omni_moe_talker_text',
            'output_attentions': False,
        },
        'num_code_groups': 32,
        'thinker_hidden_size': 64,
        'codec_eos_token_id': 239,
        'accept_hidden_layer': 18,
        'codec_nothink_id': 240,
        'codec_think_bos_id': 241,
        'codec_think_eos_id': 242,
        'codec_pad_id': 237,
        'codec_bos_id': 238,
        'audio_token_id': 247,
        'image_token_id': 250,
        'video_token_id': 251,
        'vision_start_token_id': 249,
        'position_id_per_seconds': 25,
        'audio_start_token_id': 252,
        'speaker_id': None,
        'initializer_range': 0.02,
        'tie_word_embeddings': False,
        '_name_or_path': '',
        'model_type': '',
        'output_attentions': False,
    },
    'code2wav_config': {
        'architectures': None,
        'output_hidden_states': False,
        'return_dict': True,
        'dtype': None,
        'chunk_size_feed_forward': 0,
        'is_encoder_decoder': False,
        'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
        'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
        'problem_type': None,
        'codebook_size': 64,
        'hidden_size': 64,
        'max_position_embeddings': 8000,
        'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'default'},
        'num_attention_heads': 4,
        'num_key_value_heads': 4,
        'attention_bias': False,
        'sliding_window': 72,
        'intermediate_size': 128,
        'hidden_act': 'silu',
        'layer_scale_initial_scale': 0.01,
        'rms_norm_eps': 1e-05,
        'num_hidden_layers': 2,
        'num_quantizers': 16,
        'upsample_rates': [8, 5, 4, 3],
        'upsampling_ratios': [2, 2],
        'decoder_dim': 1536,
        'attention_dropout': 0.0,
        'initializer_range': 0.02,
        '_name_or_path': '',
        'model_type': '',
        'output_attentions': False,
    },
    'enable_audio_output': True,
    'im_start_token_id': 245,
    'im_end_token_id': 246,
    'tts_pad_token_id': 253,
    'tts_bos_token_id': 254,
    'tts_eos_token_id': 255,
    'system_token_id': 243,
    'user_token_id': 236,
    'assistant_token_id': 244,
    'initializer_range': 0.02,
    'model_type': 'qwen3_omni_moe',
    'output_attentions': False,
}


def tiny_model():
    """A fresh tiny Qwen3OmniMoeForConditionalGeneration with the suite's deterministic random weights (seed 0; weights left all
    zero by the initialisation get small random values, so that every input path shows in the logits)."""
    torch.manual_seed(0)
    model = Qwen3OmniMoeForConditionalGeneration(Qwen3OmniMoeConfig.from_dict(CONFIG))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


def reproduce():
    """build: the steps up to the failure."""
    tiny_model()  # building the tiny model raises


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
