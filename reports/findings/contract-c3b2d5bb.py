# Standalone reproducer of findings group contract-c3b2d5bb: contract at generate did not compile the decode step (its cache is not a compileable static cache, or the model's generate bypasses compilation)
#
# Seen with transformers 5.24.0, torch 2.13.0+cpu, cpu / float32 / backend inductor. Needs only torch and
#   transformers (ONNX checks: onnxruntime too); no weights, no network.
# Fingerprint the suite recorded: {"kind": "contract", "what": "generate did not compile the decode step (its
#   cache is not a compileable static cache, or the model's generate bypasses compilation)"}
# Covers 1 class(es), 2 cell(s): MusicgenForConditionalGeneration; checks: compile_decode (1),
#   compile_decode@inductor (1).
# Cells: MusicgenForConditionalGeneration (compile_decode, compile_decode@inductor).
# This script: MusicgenForConditionalGeneration / compile_decode@inductor (a tiny random
#   MusicgenForConditionalGeneration from the config below, the inputs the check fed, the check's steps up to the
#   failure).
#
# Diagnosis: contract at `generate did not compile the decode step (its cache is not a compileable static cache,
#   or the model's generate bypasses compilation)` (site in no code site). The suite's message, masked: generate
#   did not compile the decode step (its cache is not a compileable static cache, or the model's generate bypasses
#   compilation)
#
# Note: left out: the comparison of each step with one forward without cache (compile_decode's second reference)
# Run: python this_file.py. The last line it prints is REPRO-RESULT {json}: the failure's fingerprint by the
#   suite's rules (raised: false when nothing failed).

import inspect
import os
import sys
import tempfile

import torch
import transformers
from transformers import MusicgenForConditionalGeneration
from transformers import MusicgenConfig
from torch._dynamo.utils import counters, guard_failures
from transformers import LogitsProcessorList
from transformers.generation.configuration_utils import CompileConfig

CONFIG = {
    'output_hidden_states': False,
    'return_dict': True,
    'dtype': None,
    'chunk_size_feed_forward': 0,
    'is_encoder_decoder': True,
    'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
    'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
    'problem_type': None,
    'text_encoder': {
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
        'd_model': 64,
        'd_kv': 64,
        'd_ff': 128,
        'num_layers': 2,
        'num_decoder_layers': 2,
        'num_heads': 4,
        'relative_attention_num_buckets': 32,
        'relative_attention_max_distance': 128,
        'dropout_rate': 0.1,
        'layer_norm_epsilon': 1e-06,
        'initializer_factor': 1.0,
        'feed_forward_proj': 'relu',
        'use_cache': False,
        'pad_token_id': 0,
        'eos_token_id': 1,
        'classifier_dropout': 0.0,
        'is_decoder': False,
        'dense_act_fn': 'relu',
        'is_gated_act': False,
        'scale_decoder_outputs': True,
        'tie_word_embeddings': True,
        '_name_or_path': '',
        'model_type': 't5',
        'output_attentions': False,
    },
    'audio_encoder': {
        'architectures': None,
        'output_hidden_states': False,
        'return_dict': True,
        'dtype': None,
        'chunk_size_feed_forward': 0,
        'is_encoder_decoder': False,
        'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
        'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
        'problem_type': None,
        'target_bandwidths': [1.5, 3.0, 6.0, 12.0, 24.0],
        'sampling_rate': 24000,
        'audio_channels': 1,
        'normalize': False,
        'chunk_length_s': None,
        'overlap': None,
        'hidden_size': 64,
        'num_filters': 4,
        'num_residual_layers': 1,
        'upsampling_ratios': [8, 5, 4, 2],
        'norm_type': 'weight_norm',
        'kernel_size': 7,
        'last_kernel_size': 7,
        'residual_kernel_size': 3,
        'dilation_growth_rate': 2,
        'use_causal_conv': True,
        'pad_mode': 'reflect',
        'compress': 2,
        'num_lstm_layers': 2,
        'trim_right_ratio': 1.0,
        'codebook_size': 64,
        'codebook_dim': 64,
        'use_conv_shortcut': True,
        '_name_or_path': '',
        'model_type': 'encodec',
        'output_attentions': False,
    },
    'decoder': {
        'architectures': None,
        'output_hidden_states': False,
        'return_dict': True,
        'dtype': None,
        'chunk_size_feed_forward': 0,
        'is_encoder_decoder': False,
        'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
        'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
        'problem_type': None,
        'vocab_size': 64,
        'max_position_embeddings': 2048,
        'num_hidden_layers': 2,
        'ffn_dim': 128,
        'num_attention_heads': 4,
        'layerdrop': 0.0,
        'use_cache': True,
        'activation_function': 'gelu',
        'hidden_size': 64,
        'dropout': 0.1,
        'attention_dropout': 0.0,
        'activation_dropout': 0.0,
        'initializer_factor': 0.02,
        'scale_embedding': False,
        'num_codebooks': 4,
        'audio_channels': 1,
        'pad_token_id': 64,
        'bos_token_id': 64,
        'eos_token_id': None,
        'tie_word_embeddings': False,
        'is_decoder': False,
        'add_cross_attention': False,
        'cross_attention_hidden_size': None,
        '_name_or_path': '',
        'model_type': 'musicgen_decoder',
        'output_attentions': False,
    },
    'initializer_factor': 0.02,
    'model_type': 'musicgen',
    'output_attentions': False,
}
BACKEND = 'inductor'
ATOL = 0.0001
RTOL = 1.3e-06
NEW_TOKENS = 5


def tiny_model():
    """A fresh tiny MusicgenForConditionalGeneration with the suite's deterministic random weights (seed 0; weights left all
    zero by the initialisation get small random values, so that every input path shows in the logits)."""
    torch.manual_seed(0)
    model = MusicgenForConditionalGeneration(MusicgenConfig.from_dict(CONFIG))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


def sample_inputs():
    """The inputs compile_decode fed (token ids literal, media seeded random: see the header)."""
    g = torch.Generator().manual_seed(0)
    return {
        'input_ids': torch.tensor([[0, 0, 0, 63, 91, 193, 76, 18, 167], [143, 147, 56, 135, 69, 45, 124, 22, 118]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
        'decoder_input_ids': torch.tensor([[64, 24, 24], [64, 12, 58], [64, 1, 38], [64, 39, 23], [64, 46, 24], [64, 17, 37], [64, 25, 13], [64, 8, 9]], dtype=torch.int64),
    }


# --- the check's pieces (vlm-conformance's rules, restated) ---

def close(actual, expected, atol, rtol=1.3e-6):
    """(within, "<diff> > <allowed>" at the worst element): |actual - expected| <= atol + rtol * |expected|
    elementwise, equal entries (two equal infinities too) differ by 0, NaN is beyond any tolerance."""
    if actual.shape != expected.shape:
        raise AssertionError(f"logits shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if not actual.numel():
        return True, ""
    a, e = actual.detach().double(), expected.detach().double()
    delta = torch.where(a == e, torch.zeros_like(a), (a - e).abs())
    allowed = atol + rtol * e.abs()
    ratios = (delta / allowed).flatten()
    nan = torch.isnan(ratios)
    worst = int(nan.nonzero()[0]) if nan.any() else int(ratios.argmax())
    within = not nan.any() and float(ratios[worst]) <= 1.0
    return within, f"{float(delta.flatten()[worst]):.3g} > {float(allowed.flatten()[worst]):.3g}"


def static_cache(config, max_len, batch_size):
    """The StaticCache generate makes for cache_implementation="static" (the decoder's text config)."""
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kwargs = {"config": config, "max_cache_len": max_len}
    for name in ("max_batch_size", "batch_size"):
        if name in params:
            kwargs[name] = batch_size
    return StaticCache(**kwargs)


class ForceTokens:
    """A logits processor: greedy decoding that follows the given tokens (compile_decode forces eager's)."""

    def __init__(self, tokens):
        self.tokens, self.step = tokens, 0

    def __call__(self, input_ids, scores):
        forced = torch.full_like(scores, float("-inf"))
        forced.scatter_(1, self.tokens[:, self.step:self.step + 1], 0.0)
        self.step += 1
        return forced


def greedy(model, inputs, new_tokens, **extra):
    """Greedy generate of exactly `new_tokens` tokens (EOS cannot stop it), generate's auto-compile off."""
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, disable_compile=True, **extra)


def reproduce():
    """compile_decode: the steps up to the failure."""
    inputs = sample_inputs()
    eager = greedy(tiny_model(), inputs, NEW_TOKENS, output_logits=True, return_dict_in_generate=True)
    model = tiny_model()
    config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
    config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
    torch._dynamo.reset()
    counters.clear()
    with (failing_as("exception", unsupported="graph_break", backend=BACKEND), torch.no_grad(),
          torch._dynamo.config.patch(recompile_limit=NEW_TOKENS + 1)):  # count every recompile
        compiled = model.generate(
            **inputs, do_sample=False, num_beams=1, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
            disable_compile=False, cache_implementation="static", compile_config=config, output_logits=True,
            return_dict_in_generate=True,
            logits_processor=LogitsProcessorList([]))  # forced onto the eager tokens
    breaks = list(counters["graph_break"])
    if breaks:
        raise Finding("graph_break", f"the compiled decode step has {len(breaks)} graph break(s), first: "
                                     f"{breaks[0]}")
    if not counters["stats"]["unique_graphs"]:
        raise Finding("contract", "generate did not compile the decode step (its cache is not a "
                      "compileable static cache, or the model's generate bypasses compilation)")
    failed = [str(reason) for reasons in guard_failures.values() for reason in reasons]
    if failed:
        raise Finding("recompile", "decode step recompiled after the first step; failed guard: "
                      + failed[0].splitlines()[0], guard=failed[0])
    for step, (actual, expected) in enumerate(zip(compiled.logits, eager.logits)):
        within, beyond = close(actual, expected, ATOL, RTOL)
        if not within:
            what = "prefill" if step == 0 else f"decode step {step}"
            raise Finding("contract", f"{what}: compiled static-cache logits differ from eager "
                                      f"dynamic-cache decoding by {beyond}")


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
