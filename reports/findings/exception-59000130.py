# Standalone reproducer of findings group exception-59000130: exception at transformers.utils.deprecation:deprecate_kwarg.<locals>.wrapper.<locals>.wrapped_func
#
# Seen with transformers 5.24.0, torch 2.13.0+cpu, cpu / float32 / backend eager. Needs only torch and
#   transformers (ONNX checks: onnxruntime too); no weights, no network.
# Fingerprint the suite recorded: {"error": "TypeError", "kind": "exception", "where":
#   "transformers.utils.deprecation:deprecate_kwarg.<locals>.wrapper.<locals>.wrapped_func"}
# Covers 1 class(es), 1 cell(s): PI0ForConditionalGeneration; checks: legacy_cache (1).
# Cells: PI0ForConditionalGeneration (legacy_cache).
# This script: PI0ForConditionalGeneration / legacy_cache (a tiny random PI0ForConditionalGeneration from the
#   config below, the inputs the check fed, the check's steps up to the failure).
#
# Diagnosis: exception at `transformers.utils.deprecation:deprecate_kwarg.<locals>.wrapper.<locals>.wrapped_func`
#   (site in transformers); raising TypeError. The suite's message, masked: TypeError:
#   PI0ForConditionalGeneration.forward() missing # required positional argument: 'state' (at
#   transformers/utils/deprecation.py:#)
#
# Inputs: token ids and masks as recorded; pixel_values, noise seeded random of the recorded shapes (the suite's
#   media are random too, the values differ).
# Note: left out: what a raw legacy tuple passed to forward does (legacy_cache's last step)
# Run: python this_file.py. The last line it prints is REPRO-RESULT {json}: the failure's fingerprint by the
#   suite's rules (raised: false when nothing failed).

import inspect
import os
import sys
import tempfile

import torch
import transformers
from transformers import PI0ForConditionalGeneration
from transformers import PI0Config

CONFIG = {
    'output_hidden_states': False,
    'return_dict': True,
    'dtype': None,
    'chunk_size_feed_forward': 0,
    'is_encoder_decoder': False,
    'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
    'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
    'problem_type': None,
    'vlm_config': {
        'architectures': None,
        'output_hidden_states': False,
        'return_dict': True,
        'dtype': None,
        'chunk_size_feed_forward': 0,
        'is_encoder_decoder': False,
        'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
        'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
        'problem_type': None,
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
            'hidden_size': 64,
            'intermediate_size': 128,
            'num_hidden_layers': 2,
            'num_attention_heads': 4,
            'num_channels': 3,
            'image_size': 32,
            'patch_size': 8,
            'hidden_act': 'gelu_pytorch_tanh',
            'layer_norm_eps': 1e-06,
            'attention_dropout': 0.0,
            'vision_use_head': False,
            '_name_or_path': '',
            'model_type': 'siglip_vision_model',
            'vocab_size': 256,
            'projection_dim': 64,
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
            'num_key_value_heads': 1,
            'head_dim': 16,
            'hidden_act': 'gelu_pytorch_tanh',
            'max_position_embeddings': 8192,
            'initializer_range': 0.02,
            'rms_norm_eps': 1e-06,
            'use_cache': True,
            'pad_token_id': 0,
            'eos_token_id': 1,
            'bos_token_id': 2,
            'tie_word_embeddings': True,
            'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'default'},
            'attention_bias': False,
            'attention_dropout': 0.0,
            'use_bidirectional_attention': True,
            '_name_or_path': '',
            'model_type': 'gemma',
            'num_image_tokens': 16,
            'output_attentions': False,
        },
        'image_token_index': 255,
        'vocab_size': 256,
        'projection_dim': 64,
        'hidden_size': 64,
        'tie_word_embeddings': True,
        '_name_or_path': '',
        'model_type': 'paligemma',
        'output_attentions': False,
    },
    'dit_config': {
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
        'num_key_value_heads': 1,
        'head_dim': 16,
        'hidden_act': 'gelu_pytorch_tanh',
        'max_position_embeddings': 8192,
        'initializer_range': 0.02,
        'rms_norm_eps': 1e-06,
        'use_cache': True,
        'pad_token_id': 0,
        'eos_token_id': 1,
        'bos_token_id': 2,
        'tie_word_embeddings': True,
        'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'default'},
        'attention_bias': False,
        'attention_dropout': 0.0,
        'use_bidirectional_attention': True,
        '_name_or_path': '',
        'is_causal': True,
        'model_type': 'gemma',
        'output_attentions': False,
    },
    'chunk_size': 50,
    'max_state_dim': 32,
    'max_action_dim': 32,
    'num_inference_steps': 10,
    'time_sampling_beta_alpha': 1.5,
    'time_sampling_beta_beta': 1.0,
    'time_sampling_scale': 0.999,
    'time_sampling_offset': 0.001,
    'min_period': 0.004,
    'max_period': 4.0,
    'loss_reduction': 'mean',
    'model_type': 'pi0',
    'output_attentions': False,
}
IDS = 'input_ids'
CACHE = 'cache'
DECODE_STEPS = 2
EXTRA = {}
ATOL = 1e-05
RTOL = 1.3e-06


def tiny_model():
    """A fresh tiny PI0ForConditionalGeneration with the suite's deterministic random weights (seed 0; weights left all
    zero by the initialisation get small random values, so that every input path shows in the logits)."""
    torch.manual_seed(0)
    model = PI0ForConditionalGeneration(PI0Config.from_dict(CONFIG))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


def sample_inputs():
    """The inputs legacy_cache fed (token ids literal, media seeded random: see the header)."""
    g = torch.Generator().manual_seed(0)
    return {
        'input_ids': torch.tensor([[0, 0, 0, 29, 146, 173, 27, 176] + [255] * 16 + [14, 154, 191, 64], [0, 0, 0, 53, 177, 172, 115] + [255] * 16 + [155, 43, 49, 166, 89]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 25, [0, 0, 0] + [1] * 25], dtype=torch.int64),
        'pixel_values': torch.randn((2, 1, 3, 32, 32), generator=g, dtype=torch.float32),
        'pixel_attention_mask': torch.full((2, 1), True, dtype=torch.bool),
        'state': torch.tensor([[0.8538718819618225, 0.8351276516914368, 0.7582133412361145, -1.5303689241409302, -0.4473475217819214, 0.2807408571243286, -0.12731705605983734, 1.1881386041641235, 0.08767516165971756, 1.5282564163208008, -1.448522686958313, 0.8038290143013, -0.8713321089744568, 0.2224467694759369, -0.069220170378685, -0.3815804123878479, -1.3045508861541748, 1.3294090032577515, -0.3300064504146576, -0.545979380607605, 0.8411675095558167, -0.1280260980129242, -0.3491677939891815, -0.07314260303974152, -0.2928176522254944, 0.08410710841417313, -0.5622379779815674, -0.0029187838081270456, 1.5581729412078857, 0.3019449710845947, 1.070264458656311, 0.45160147547721863], [0.5312950611114502, 0.7266605496406555, -0.6187140941619873, 0.30459699034690857, -0.2738043963909149, -0.5394694209098816, -0.42674458026885986, 1.194504737854004, 0.8116320967674255, 1.1249611377716064, 0.3074210584163666, 1.3693877458572388, 0.330515593290329, 2.6040329933166504, 0.5147572159767151, 1.0329558849334717, 2.1097915172576904, -1.1579978466033936, 0.7347648739814758, 1.757173776626587, -0.6136267781257629, -0.25366532802581787, -1.4018948078155518, 0.7131887078285217, -2.0824015140533447, 1.30597984790802, 0.4852987825870514, -0.942952573299408, -0.5223046541213989, -0.3573267161846161, 0.43954187631607056, 0.5349658727645874]], dtype=torch.float32),
        'noise': torch.randn((2, 50, 32), generator=g, dtype=torch.float32),
        'timestep': torch.tensor([0.30000001192092896, 0.699999988079071], dtype=torch.float32),
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


def cache_of(output):
    """The cache a forward returned (`cache` in newer 5.x, `past_key_values` before)."""
    for name in ("cache", "past_key_values"):
        value = output.get(name) if isinstance(output, dict) else getattr(output, name, None)
        if value is not None:
            return value
    return None


def to_legacy(cache):
    """The legacy tuples of a cache, cloned: per layer (key, value), or (key, value, cross key, cross value)."""
    def pairs(c):
        return tuple((getattr(layer, "keys", None), getattr(layer, "values", None)) for layer in c.layers)

    if hasattr(cache, "to_legacy_cache"):
        legacy = cache.to_legacy_cache()
    elif hasattr(cache, "self_attention_cache"):
        legacy = tuple(a + b for a, b in zip(pairs(cache.self_attention_cache), pairs(cache.cross_attention_cache)))
    else:
        legacy = pairs(cache)
    return tuple(tuple(t.detach().clone() if isinstance(t, torch.Tensor) else t for t in layer) for layer in legacy)


def from_legacy(cache, legacy):
    """The installed API's conversion back: `from_legacy_cache` where it exists, else the constructor."""
    from transformers.cache_utils import DynamicCache

    kind = type(cache) if hasattr(cache, "self_attention_cache") else DynamicCache
    return kind.from_legacy_cache(legacy) if hasattr(kind, "from_legacy_cache") else kind(legacy)


def reproduce():
    """legacy_cache: the steps up to the failure."""
    def decode(owner, prefill, output, cache):
        """DECODE_STEPS steps after the prefill, feeding the last prompt tokens back, with the inputs"
        generate passes (its own prepare_inputs_for_generation where the model has one)."""
        ids, state, logits = prefill[IDS], None, []
        for step in range(DECODE_STEPS):
            token = prefill[IDS][:, prefill[IDS].shape[1] - 1 - step:prefill[IDS].shape[1] - step]
            inputs = {IDS: token}
            if 'attention_mask' in prefill:
                mask = prefill['attention_mask']
                inputs['attention_mask'] = torch.cat([mask, mask.new_ones((mask.shape[0], step + 1))], dim=1)
            inputs[CACHE] = cache
            inputs['use_cache'] = True
            with torch.no_grad():
                output = owner(**inputs)
            logits.append(logits_of(output).detach().clone())
            cache = cache_of(output)
        return logits

    prefill = sample_inputs()
    owner = tiny_model()  # the module whose forward takes the cache
    with torch.no_grad():
        output = owner(**prefill, use_cache=True)
    cache = cache_of(output)
    legacy = to_legacy(cache)
    converted = from_legacy(cache, legacy)
    expected = decode(owner, prefill, output, cache)
    actual = decode(owner, prefill, output, converted)
    for step, (got, want) in enumerate(zip(actual, expected)):
        within, beyond = close(got, want, ATOL, RTOL)
        if not within:
            what = f"decode step {step + 1} from {type(converted).__name__}"
            what += ".from_legacy_cache" if hasattr(type(converted), "from_legacy_cache") else "(tuples)"
            raise Finding("numerical_mismatch", f"{what}: logits differ from eager by {beyond}", what=what)


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
