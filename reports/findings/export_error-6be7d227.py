# Standalone reproducer of findings group export_error-6be7d227: export_error at transformers.generation.utils:GenerationMixin._validate_generated_length
#
# Seen with transformers 5.24.0, torch 2.13.0+cpu, cpu / float32 / backend eager. Needs only torch and
#   transformers (ONNX checks: onnxruntime too); no weights, no network.
# Fingerprint the suite recorded: {"error": "ValueError", "kind": "export_error", "what":
#   "OnnxExporter.export_for_generation(dynamic=True)", "where":
#   "transformers.generation.utils:GenerationMixin._validate_generated_length"}
# Covers 1 class(es), 3 cell(s): VoxtralRealtimeForConditionalGeneration; checks: exporter_dynamo_generate (1),
#   exporter_onnx_generate (1), exporter_openvino_generate (1).
# Cells: VoxtralRealtimeForConditionalGeneration (exporter_dynamo_generate, exporter_onnx_generate,
#   exporter_openvino_generate).
# This script: VoxtralRealtimeForConditionalGeneration / exporter_onnx_generate (a tiny random
#   VoxtralRealtimeForConditionalGeneration from the config below, the inputs the check fed, the check's steps up
#   to the failure).
#
# Diagnosis: export_error at `transformers.generation.utils:GenerationMixin._validate_generated_length` (site in
#   transformers); raising ValueError. The suite's message, masked:
#   OnnxExporter.export_for_generation(dynamic=True): ValueError: Input length of input_ids is #, but `max_length`
#   is set to # This can lead to unexpected behavior. You should consider increasing `max_length` or, better yet,
#   setting `max_new_tokens`. (at transformers/generation/utils.py:#)
#
# Inputs: token ids and masks as recorded; input_features seeded random of the recorded shapes (the suite's media
#   are random too, the values differ).
# Note: OnnxExporter.export_for_generation(dynamic=True) over the check's static cache, greedy; one request (the
#   check also generates for a prompt of another length)
# Run: python this_file.py. The last line it prints is REPRO-RESULT {json}: the failure's fingerprint by the
#   suite's rules (raised: false when nothing failed).

import inspect
import os
import sys
import tempfile

import torch
import transformers
from transformers import VoxtralRealtimeForConditionalGeneration
from transformers import VoxtralRealtimeConfig

CONFIG = {
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
        'vocab_size': 256,
        'hidden_size': 64,
        'intermediate_size': 128,
        'num_hidden_layers': 2,
        'num_attention_heads': 4,
        'activation_function': 'gelu',
        'num_mel_bins': 16,
        'initializer_range': 0.02,
        'attention_dropout': 0.0,
        'hidden_act': 'silu',
        'max_position_embeddings': 1500,
        'rms_norm_eps': 1e-05,
        'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'default'},
        'sliding_window': 750,
        'head_dim': 16,
        'use_cache': True,
        '_name_or_path': '',
        'model_type': 'voxtral_realtime_encoder',
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
        'head_dim': 16,
        'hidden_act': 'silu',
        'max_position_embeddings': 131072,
        'initializer_range': 0.02,
        'rms_norm_eps': 1e-05,
        'use_cache': True,
        'pad_token_id': None,
        'bos_token_id': 1,
        'eos_token_id': 2,
        'rope_parameters': {'rope_theta': 1000000.0, 'rope_type': 'default'},
        'sliding_window': 8192,
        'attention_dropout': 0.0,
        '_name_or_path': '',
        'tie_word_embeddings': True,
        'model_type': 'voxtral_realtime_text',
        'output_attentions': False,
    },
    'projector_hidden_act': 'gelu',
    'audio_length_per_tok': 8,
    'default_num_delay_tokens': 6,
    'downsample_factor': 4,
    'tie_word_embeddings': True,
    'use_cache': True,
    'hidden_size': 64,
    'model_type': 'voxtral_realtime',
    'output_attentions': False,
}
GENERATION = {
    'max_new_tokens': 4,
    'min_new_tokens': 4,
    'do_sample': False,
    'num_beams': 1,
    'cache_implementation': 'static',
    'max_cache_len': 14,
    'output_logits': True,
    'return_dict_in_generate': True,
    'pad_token_id': 0,
}
NEW_TOKENS = 4
ATOL = 0.0001
RTOL = 1.3e-06


def tiny_model():
    """A fresh tiny VoxtralRealtimeForConditionalGeneration with the suite's deterministic random weights (seed 0; weights left all
    zero by the initialisation get small random values, so that every input path shows in the logits)."""
    torch.manual_seed(0)
    model = VoxtralRealtimeForConditionalGeneration(VoxtralRealtimeConfig.from_dict(CONFIG))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


def sample_inputs():
    """The inputs exporter_onnx_generate fed (token ids literal, media seeded random: see the header)."""
    g = torch.Generator().manual_seed(0)
    return {
        'input_ids': torch.tensor([[37, 107, 92, 39, 189, 180, 10, 29, 23]], dtype=torch.int64),
        'attention_mask': torch.full((1, 9), 1, dtype=torch.int64),
        'input_features': torch.randn((1, 16, 72), generator=g, dtype=torch.float32),
        'num_delay_tokens': 6,
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


def exporter_of(backend, **config):
    """(transformers.exporters' exporter of `backend`, its config with `config`) (`checks.common.exporters`)."""
    import transformers.exporters as exporters

    exporter, config_class = {"dynamo": ("DynamoExporter", "DynamoConfig"), "onnx": ("OnnxExporter", "OnnxConfig"),
                              "executorch": ("ExecutorchExporter", "ExecutorchConfig"),
                              "openvino": ("OpenVINOExporter", "OpenVINOConfig")}[backend]
    with failing_as("export_error"):
        return getattr(exporters, exporter)(), getattr(exporters, config_class)(**config)


def exporter_call(function, *args, **kwargs):
    """`function(*args, **kwargs)` of transformers.exporters; a failure is the exception that started the chain
    of its wrappers (the exporters re-raise with their own), of kind export_error unless its words say otherwise."""
    try:
        return function(*args, **kwargs)
    except Exception as exc:
        root = exc
        while root.__cause__ is not None and root.__cause__ is not root:
            root = root.__cause__
        root.repro_as = ("export_error", "", "")
        raise root from None


def runner_kwargs(runner, owner, inputs):
    """What a runner is called with (`checks.common.exporters.prepared` and `traced_kwargs`): the output flags
    dropped, the exporter's own `precompute_export_inputs` applied, only the kwargs its graph was traced with."""
    from transformers.exporters.utils import precompute_export_inputs

    flags = ("use_cache", "output_attentions", "output_hidden_states", "return_dict", "return_loss")
    ready = {key: value for key, value in inputs.items() if key not in flags}
    with torch.no_grad():
        precompute_export_inputs(owner, ready)
    metadata = runner.metadata
    return {key: value for key, value in ready.items() if key in metadata.kwargs and key not in metadata.in_constants}


def bound(original, args, kwargs):
    """A call's arguments by name, `**kwargs` merged (`checks.common.exporters.bound_kwargs`)."""
    signature = inspect.signature(original)
    named = {}
    for name, value in signature.bind(*args, **kwargs).arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            named.update(value)
        elif kind is not inspect.Parameter.VAR_POSITIONAL:
            named[name] = value
    return named


class RoutedGenerate:
    """`checks.common.exporters.RoutedModel`: a fresh model whose named submodules (transformers'
    `_find_multimodal_submodules`) that are components call their runners, whose first forward of a generate goes
    to the `prefill` runner (if any, else its own code) and every later one to `decode`; `eager_calls` counts the
    calls of named submodules no component covers (their PyTorch code ran)."""

    def __init__(self, model, runners):
        import functools

        from transformers.exporters.utils import _find_multimodal_submodules

        self.model, self.calls, self.eager_calls = model, 0, {}
        submodules = _find_multimodal_submodules(model)
        for name, module in submodules.items():
            if name not in runners:
                module.register_forward_hook(lambda *_, name=name: self.eager_calls.__setitem__(
                    name, self.eager_calls.get(name, 0) + 1))
        for name, runner in runners.items():
            if name not in ("prefill", "decode"):
                self._route(submodules[name], runner)
        original, prefill, decode = model.forward, runners.get("prefill"), runners["decode"]

        @functools.wraps(original)
        def forward(*args, **kwargs):
            first, self.calls = self.calls == 0, self.calls + 1
            if first and prefill is None:
                return original(*args, **kwargs)
            runner = prefill if first else decode
            return exporter_call(runner, **runner_kwargs(runner, model, bound(original, args, kwargs)))

        model.forward = forward

    def _route(self, module, runner):
        import functools

        original = module.forward

        @functools.wraps(original)
        def forward(*args, **kwargs):
            return exporter_call(runner, **runner_kwargs(runner, module, bound(original, args, kwargs)))

        module.forward = forward

    def generate(self, request, config):
        import copy

        self.calls = 0
        with torch.no_grad():
            return self.model.generate(**copy.deepcopy(request), generation_config=copy.deepcopy(config))


def reproduce():
    """exporter_onnx_generate: the steps up to the failure."""
    inputs = sample_inputs()  # batch 1: the sample's second prompt, its padding removed
    config = tiny_model().generation_config
    config.update(**GENERATION)
    exporter, export_config = exporter_of('onnx', dynamic=True)
    exported = exporter_call(exporter.export_for_generation, tiny_model(), dict(inputs), export_config,
                             generation_config=config)


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
