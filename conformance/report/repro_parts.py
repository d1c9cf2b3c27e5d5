"""The pieces a standalone reproducer's steps are made of: their sources are copied into the scripts that use them.

Contract: every function and class here uses only torch, transformers
(imported inside its body) and onnxruntime (`OrtProgram`), never `conformance`, because `conformance.report.repro` pastes the source of
those a script needs (`SOURCES`, by name, with what each needs first:
`NEEDS`) above its ``reproduce()``. Each restates one rule of a check, as
small as the rule allows, with the check's name in its docstring:

* `logits_of` (`checks.common.compare.logits_of`) and `close` (the suite's
  closeness rule ``|a - e| <= atol + rtol*|e|``, equal entries 0, NaN
  beyond): `close` returns (within, ``"<diff> > <allowed>"``);
* `LogitsModule` (`checks.common.export.LogitsModule`), `export_and_reload`
  (export, save, load: `export_forward`); a failure propagates as raised, a failed
  comparison is an AssertionError in the check's words (no fingerprint code: the
  verification judges the printed traceback from outside, `repro_verify`);
* `static_cache` (the StaticCache generate makes, batch and length given),
  `ForceTokens` (`compile_decode`), `greedy` / `scores_diff`
  (`static_cache`);
* `VisionPart`, `EmbedPart`, `DecoderPart`, `FunctionalStep`
  (`checks.common.generation`, `onnx_generate`), `image_features`;
* `StaticCacheModule`, `slot_mask` (`export_static_cache`);
* `runner_kwargs`, `route`
  (`checks.common.exporters`: the `exporter_*` columns); `sqnr_db`, `artifact_bytes`
  (`checks.common.quantized`: the quantized exporter columns).
"""

import inspect
import os
import tempfile

import torch


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


class LogitsModule(torch.nn.Module):
    """`forward(**tensors)` -> the logits of `model(**tensors, **constants)`: the module exported."""

    def __init__(self, model, constants):
        super().__init__()
        self.model = model
        self.constants = constants

    def forward(self, **tensors):
        return logits_of(self.model(**tensors, **self.constants))


def export_and_reload(module, kwargs, strict, args=()):
    """torch.export.export(strict=...), then torch.export.save / load through a temporary .pt2."""
    with torch.no_grad():
        program = torch.export.export(module, args, kwargs=kwargs, strict=strict)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "program.pt2")
        torch.export.save(program, path)
        return torch.export.load(path)


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


class ForceTokens:
    """A logits processor: greedy decoding that follows the given tokens (the eager run's)."""

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


def scores_diff(a, b):
    """Max abs difference of two score tensors, equal entries (both -inf too) counting 0."""
    a, b = a.double(), b.double()
    delta = torch.where(a == b, torch.zeros_like(a), (a - b).abs())
    return float(delta.max()) if delta.numel() else 0.0


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


class FunctionalStep(DecoderPart):
    """The decode step with the cache as explicit inputs and outputs (ONNX has no in-place update of an input)."""

    def forward(self, inputs_embeds, cache_tensors=None, **text):
        state = [t.clone() for t in cache_tensors]
        return (super().forward(inputs_embeds, state, **text), *state)


class StaticCacheModule(torch.nn.Module):
    """The model over a StaticCache initialized up front whose tensors are buffers; forward takes the inputs,
    `cache_position` (copied into every layer's write counter) and a 2D mask over all slots."""

    def __init__(self, model, cache_kwarg, text_config, constants, batch, max_len, heads, head_dim):
        super().__init__()
        self.model, self.cache_kwarg, self.constants = model, cache_kwarg, constants
        self.cache = full_static_layers(static_cache(text_config, max_len, batch), max_len)
        if hasattr(self.cache, "early_initialization"):
            self.cache.early_initialization(batch, heads, head_dim, model.dtype, model.device)
        for i, layer in enumerate(getattr(self.cache, "layers", [])):
            for name in ("keys", "values", "cumulative_length"):
                if isinstance(getattr(layer, name, None), torch.Tensor):
                    self.register_buffer(f"cache_{name}_{i}", getattr(layer, name), persistent=False)
        self.takes_cache_position = "cache_position" in inspect.signature(model.forward).parameters

    def forward(self, cache_position, attention_mask, **tensors):
        for layer in getattr(self.cache, "layers", []):
            if isinstance(getattr(layer, "cumulative_length", None), torch.Tensor):
                layer.cumulative_length.copy_(cache_position[0])
        kwargs = dict(tensors, **self.constants, attention_mask=attention_mask, use_cache=True)
        kwargs[self.cache_kwarg] = self.cache
        if self.takes_cache_position:
            kwargs["cache_position"] = cache_position
        return logits_of(self.model(**kwargs))


def slot_mask(mask2d, max_len):
    """The prompt's 2D mask over every cache slot (later slots 1: causality hides the future)."""
    return torch.nn.functional.pad(mask2d, (0, max_len - mask2d.shape[1]), value=1)


def export_part(module, args=(), kwargs=None):
    """torch.export.export(strict=False) of one generation part."""
    with torch.no_grad():
        return torch.export.export(module, args, kwargs or {}, strict=False)


def eager_generation(model, inputs, new_tokens):
    """(the `new_tokens` greedy tokens, each step's logits) of eager generate, end-of-sequence ignored."""
    config = model.generation_config
    config.eos_token_id = None
    if config.pad_token_id is None:
        config.pad_token_id = 0
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                             num_beams=1, output_logits=True, return_dict_in_generate=True)
    return out.sequences[:, -new_tokens:], list(out.logits)


class NamedLogitsModule(LogitsModule):
    """`LogitsModule` whose forward names its tensor inputs (for a dynamic_shapes spec by name)."""

    def __init__(self, model, names, constants):
        super().__init__(model, constants)

        def forward(**tensors):
            return LogitsModule.forward(self, **tensors)

        forward.__signature__ = inspect.Signature(
            [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in names])
        self.forward = forward


def cache_of(output):
    """The cache a forward returned (`cache` in newer 5.x, `past_key_values` before)."""
    get = output.get if isinstance(output, dict) else lambda name: getattr(output, name, None)
    return next((get(name) for name in ("cache", "past_key_values") if get(name) is not None), None)


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


def torch_onnx_export(module, kwargs, path):
    """`module(**kwargs)` to an ONNX file (weights beside it) with torch.onnx's dynamo exporter over a non-strict
    torch.export; the feed (input name -> tensor) the graph was traced with."""
    feed = leaf_feed(kwargs)
    with torch.no_grad():
        program = torch.export.export(module.eval(), (), kwargs=dict(kwargs), strict=False)
        onnx_program = torch.onnx.export(program, (), kwargs=dict(kwargs), dynamo=True, input_names=list(feed),
                                         external_data=True, optimize=True, verbose=False)
    onnx_program.save(path, external_data=True)
    return feed


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


def runner_kwargs(runner, owner, inputs):
    """What a runner is called with: the output flags dropped, the exporter's own `precompute_export_inputs`
    applied, only the kwargs its graph was traced with."""
    from transformers.exporters.utils import precompute_export_inputs

    flags = ("use_cache", "output_attentions", "output_hidden_states", "return_dict", "return_loss")
    ready = {key: value for key, value in inputs.items() if key not in flags}
    with torch.no_grad():
        precompute_export_inputs(owner, ready)
    traced, constants = runner.metadata.kwargs, runner.metadata.in_constants
    return {key: value for key, value in ready.items() if key in traced and key not in constants}


def route(model, runners):
    """Makes `model` call its runners: a named submodule (transformers' `_find_multimodal_submodules`) that is a
    component its own, the first forward of a generate `prefill` (if any, else its own code), every later one
    `decode`. Returns the names of the calls of named submodules no component covers (their PyTorch code ran)."""
    import functools

    from transformers.exporters.utils import _find_multimodal_submodules

    eager_calls, forwards = [], []

    def to_runner(module, pick):  # each call to the runner pick() names (None: the module's own code)
        original = module.forward

        @functools.wraps(original)
        def forward(*args, **kwargs):
            runner = pick()
            if runner is None:
                return original(*args, **kwargs)
            named = inspect.signature(original).bind(*args, **kwargs).arguments  # by name, **kwargs merged
            kinds = {k: p.kind for k, p in inspect.signature(original).parameters.items()}
            spread = (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
            call = {k: v for k, v in named.items() if kinds[k] not in spread}
            call.update(next((v for k, v in named.items() if kinds[k] is inspect.Parameter.VAR_KEYWORD), {}))
            return runner(**runner_kwargs(runner, module, call))

        module.forward = forward

    submodules = _find_multimodal_submodules(model)
    for name, module in submodules.items():
        if name not in runners:
            module.register_forward_hook(lambda *_, name=name: eager_calls.append(name))
    for name, runner in runners.items():
        if name not in ("prefill", "decode"):
            to_runner(submodules[name], lambda runner=runner: runner)

    def prefill_then_decode():
        forwards.append(1)
        return runners.get("prefill") if len(forwards) == 1 else runners["decode"]

    to_runner(model, prefill_then_decode)
    return eager_calls



def sqnr_db(actual, expected):
    """SQNR of quantized logits against float ones, in dB (`checks.common.quantized.sqnr_db`): inf when equal."""
    expected, actual = expected.double(), actual.double()
    noise = torch.linalg.vector_norm(actual - expected)
    if noise == 0:
        return float("inf")
    return float(20 * torch.log10(torch.linalg.vector_norm(expected) / noise))


def artifact_bytes(exported):
    """The bytes of an export's saved programs, its JSON files left out (`checks.common.quantized.artifact_bytes`)."""
    with tempfile.TemporaryDirectory() as folder:
        exported.save_pretrained(folder)
        return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(folder)
                   for name in names if not name.endswith(".json"))


NEEDS = {
    "export_and_reload": ("LogitsModule",),
    "NamedLogitsModule": ("LogitsModule",),
    "onnx_export": ("leaf_feed",),
    "torch_onnx_export": ("leaf_feed",),
    "LogitsModule": ("logits_of",),
    "DecoderPart": ("logits_of", "static_cache", "full_static_layers"),
    "FunctionalStep": ("DecoderPart",),
    "VisionPart": ("image_features",),
    "StaticCacheModule": ("logits_of", "static_cache", "full_static_layers"),
    "route": ("runner_kwargs",),
}
SOURCES = ("logits_of", "close", "LogitsModule", "export_and_reload", "static_cache", "full_static_layers",
           "ForceTokens", "greedy", "scores_diff", "image_features", "VisionPart", "EmbedPart", "DecoderPart",
           "FunctionalStep", "StaticCacheModule", "slot_mask", "export_part", "eager_generation",
           "NamedLogitsModule", "cache_of", "to_legacy", "from_legacy", "leaf_feed", "onnx_export",
           "torch_onnx_export", "OrtProgram", "serve_fresh",
           "runner_kwargs", "route", "sqnr_db", "artifact_bytes")


IMPORTS = ("import inspect", "import os", "import tempfile")  # what the pieces use (a script imports them)


def closure(names) -> set[str]:
    """The named pieces and what they need."""
    wanted: set[str] = set()

    def add(name):
        if name not in wanted:
            wanted.add(name)
            for need in NEEDS.get(name, ()):
                add(need)

    for name in names:
        add(name)
    return wanted


def sources(names) -> str:
    """The source of the named pieces and of what they need, in `SOURCES` order, each once."""
    wanted = closure(names)
    return "\n\n\n".join(inspect.getsource(globals()[name]).rstrip() for name in SOURCES if name in wanted)
