# Standalone reproducer of findings group data_dependent_guard-61d1bc73: data_dependent_guard at transformers.models.qwen2_vl.modeling_qwen2_vl:Qwen2VLModel.get_rope_index
#
# Seen with transformers 5.24.0, torch 2.13.0+cpu, cpu / float32 / backend eager. Needs only torch and
#   transformers (ONNX checks: onnxruntime too); no weights, no network.
# Fingerprint the suite recorded: {"error": "GuardOnDataDependentSymNode", "kind": "data_dependent_guard",
#   "where": "transformers.models.qwen2_vl.modeling_qwen2_vl:Qwen2VLModel.get_rope_index"}
# Covers 1 class(es), 4 cell(s): Qwen2VLForConditionalGeneration; checks: export_onnx (1), exporter_dynamo_forward
#   (1), exporter_onnx_forward (1), exporter_openvino_forward (1).
# Cells: Qwen2VLForConditionalGeneration (export_onnx, exporter_dynamo_forward, exporter_onnx_forward,
#   exporter_openvino_forward).
# This script: Qwen2VLForConditionalGeneration / export_onnx (a tiny random Qwen2VLForConditionalGeneration from
#   the config below, the inputs the check fed, the check's steps up to the failure).
#
# Diagnosis: data_dependent_guard at `transformers.models.qwen2_vl.modeling_qwen2_vl:Qwen2VLModel.get_rope_index`
#   (site in transformers); raising GuardOnDataDependentSymNode. The suite's message, masked: export
#   (transformers.exporters.OnnxExporter): GuardOnDataDependentSymNode: Could not guard on data-dependent
#   expression Eq# (unhinted: Eq#). (Size-like symbols: u15) (at
#   transformers/models/qwen2_vl/modeling_qwen2_vl.py:#)
#
# Inputs: token ids and masks as recorded; pixel_values seeded random of the recorded shapes (the suite's media
#   are random too, the values differ).
# Run: python this_file.py. The last line it prints is REPRO-RESULT {json}: the failure's fingerprint by the
#   suite's rules (raised: false when nothing failed).

import inspect
import os
import sys
import tempfile

import torch
import transformers
from transformers import Qwen2VLForConditionalGeneration
from transformers import Qwen2VLConfig

CONFIG = {
    'output_hidden_states': False,
    'return_dict': True,
    'dtype': None,
    'chunk_size_feed_forward': 0,
    'is_encoder_decoder': False,
    'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
    'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
    'problem_type': None,
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
        'rms_norm_eps': 1e-05,
        'use_cache': True,
        'use_sliding_window': False,
        'sliding_window': None,
        'max_window_layers': 2,
        'layer_types': ['full_attention', 'full_attention'],
        'attention_dropout': 0.0,
        'rope_parameters': {'rope_theta': 1000000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]},
        'bos_token_id': 250,
        'eos_token_id': 251,
        'pad_token_id': None,
        '_name_or_path': '',
        'model_type': 'qwen2_vl_text',
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
        'embed_dim': 64,
        'hidden_size': 64,
        'hidden_act': 'quick_gelu',
        'mlp_ratio': 4,
        'num_heads': 4,
        'in_channels': 3,
        'patch_size': 8,
        'spatial_merge_size': 2,
        'temporal_patch_size': 2,
        'initializer_range': 0.02,
        'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'axial'},
        '_name_or_path': '',
        'model_type': 'qwen2_vl_vision',
        'output_attentions': False,
    },
    'image_token_id': 254,
    'video_token_id': 255,
    'vision_start_token_id': 252,
    'vision_end_token_id': 253,
    'tie_word_embeddings': False,
    'model_type': 'qwen2_vl',
    'output_attentions': False,
}
CONSTANTS = {'use_cache': False}
EXPORTER = 'transformers'
ATOL = 0.0001
RTOL = 1.3e-06


def tiny_model():
    """A fresh tiny Qwen2VLForConditionalGeneration with the suite's deterministic random weights (seed 0; weights left all
    zero by the initialisation get small random values, so that every input path shows in the logits)."""
    torch.manual_seed(0)
    model = Qwen2VLForConditionalGeneration(Qwen2VLConfig.from_dict(CONFIG))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


def sample_inputs():
    """The inputs export_onnx fed (token ids literal, media seeded random: see the header)."""
    g = torch.Generator().manual_seed(0)
    return {
        'input_ids': torch.tensor([[0, 0, 0, 154, 175, 161, 48, 73, 252] + [254] * 4 + [253, 132, 54, 43, 99], [0, 0, 0, 13, 185, 190, 125, 252] + [254] * 4 + [253, 81, 143, 70, 68, 177]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
        'pixel_values': torch.randn((32, 384), generator=g, dtype=torch.float32),
        'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
        'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6], dtype=torch.int64),
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


def leaf_feed(kwargs):
    """Tensor leaves of keyword inputs by dotted path (``name``, ``name.0``, ...): the ONNX graph's input names."""
    feed = {}

    def walk(value, prefix):
        if isinstance(value, torch.Tensor):
            feed[prefix] = value
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                walk(item, f"{prefix}.{index}")
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{prefix}.{key}")

    for key, value in kwargs.items():
        walk(value, key)
    return feed


def onnx_export(module, kwargs, path, exporter):
    """`module(**kwargs)` to an ONNX file (weights beside it) with transformers' OnnxExporter, or torch.onnx's
    dynamo exporter over a non-strict torch.export; the feed (input name -> tensor) the graph was traced with."""
    with torch.no_grad(), failing_as("exception"):
        if exporter == "transformers":
            from transformers.exporters import OnnxConfig, OnnxExporter

            exported = OnnxExporter().export(module, kwargs, OnnxConfig())  # adds the inputs it precomputes
            OnnxExporter.save_program(exported.program, path)
            return leaf_feed(kwargs)
        feed = leaf_feed(kwargs)
        program = torch.export.export(module.eval(), (), kwargs=dict(kwargs), strict=False)
        onnx_program = torch.onnx.export(program, (), kwargs=dict(kwargs), dynamo=True, input_names=list(feed),
                                         external_data=True, optimize=True, verbose=False)
        onnx_program.save(path, external_data=True)
        return feed


class OrtProgram:
    """An ONNX file in an ONNX Runtime CPU session: `program(feed) -> {output name: tensor}`."""

    def __init__(self, path):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, torch.get_num_threads())
        options.log_severity_level = 3
        with failing_as("exception"):
            self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.inputs = [spec.name for spec in self.session.get_inputs()]
        self.outputs = [spec.name for spec in self.session.get_outputs()]

    def __call__(self, feed):
        def lookup(name):  # transformers' exporter prefixes an input it also returns (a mutated one) with `input.`
            return feed[name] if name in feed else feed.get(name.removeprefix("input."))

        missing = [name for name in self.inputs if lookup(name) is None]
        if missing:
            raise Finding("contract", f"onnxruntime run: the graph takes {missing}, which the inputs {list(feed)} "
                                      "do not hold")
        arrays = {name: lookup(name).detach().cpu().contiguous().numpy() for name in self.inputs}
        with failing_as("exception"):
            values = self.session.run(None, arrays)
        return {name: torch.from_numpy(value) for name, value in zip(self.outputs, values)}


def reproduce():
    """export_onnx: the steps up to the failure."""
    inputs = sample_inputs()
    model = tiny_model()
    folder = tempfile.mkdtemp()
    feed = onnx_export(model, {**inputs, **CONSTANTS}, os.path.join(folder, "model.onnx"), EXPORTER)
    outputs = OrtProgram(os.path.join(folder, "model.onnx"))(feed)
    actual = outputs["logits"] if "logits" in outputs else next(iter(outputs.values()))
    with torch.no_grad():
        expected = logits_of(tiny_model()(**inputs, **CONSTANTS))
    mask = inputs.get('attention_mask')
    if isinstance(mask, torch.Tensor) and mask.dim() == 2 and expected.shape[:2] == mask.shape:
        actual, expected = actual[mask.bool()], expected[mask.bool()]  # every non-padding position
    within, beyond = close(actual, expected, ATOL, RTOL)
    if not within:
        raise Finding("numerical_mismatch", f"ONNX Runtime logits: logits differ from eager by {beyond}",
                      what="ONNX Runtime logits")


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
