"""The deployment API users call, `transformers.exporters`, shared by the `exporter_*` columns.

Contracts:

* `BACKENDS` (declared in `exporter_table`, with the table of columns) names
  each backend's exporter, config and runner class in ``transformers.exporters``,
  the packages it requires and the extra (or opt-in group) that brings it in.
* `require_exporters()` raises `NotApplicable` ("no transformers.exporters in
  transformers <version>") where the installed transformers has no such
  package (4.57), never a failure.
* `export_forward(case, backend)` is a forward column: a fresh model exported
  with ``export(model, inputs, Config(dynamic=True))`` before any eager call,
  its one component run through the backend's runner on the run's device
  (``ExportedModel.to(device, **runner_options)``: OpenVINO's CPU plugin, not its
  ``AUTO`` default, compiled in the export's float32 (`runner_options`))
  on the sample and on a variant of another prompt length (`build.variants`:
  the longer one, else the shorter; its inputs prepared by the exporter's own
  ``precompute_export_inputs``, as the sample was during the export); each
  call's logits match a plain eager forward of another fresh instance within
  the export tolerance on the non-padding positions (`non_padding`).
* `export_generation(case, backend)` is a generation column: a fresh model
  exported with ``export_for_generation(model, request, Config(dynamic=True),
  generation_config=<static cache>)`` (the model decomposed by transformers into
  encoder, projector, language model, head and decode step, captured from a real
  ``generate``); then `RoutedModel` routes another fresh instance's submodules
  (and its forward: the first call of a ``generate`` to the ``prefill``
  component where there is one, every later call to ``decode``) to the
  components' runners, so that eager ``generate`` is only the glue (placeholder
  merge, positions, argmax) and every tensor of the model comes from the
  backend (a submodule transformers names but the decomposition left out, called
  by ``generate``, is a violation: the export cannot serve the request without
  PyTorch). For two requests (the sample's second prompt, the traced one, and
  the same prompt longer), the greedy tokens must equal eager ``generate``'s
  with the same static cache, then every step's logits within the export
  tolerance.
* Failures (`exporter_failure`): the exporter's own first line (the innermost
  exception of its wrappers, with the stage and the component it names) and the
  innermost transformers site, ``transformers/exporters/`` included: a bug in
  the exporter is an upstream finding (fingerprint kind ``export_error``, or
  ``data_dependent_guard`` / ``unsupported`` as `fingerprints.kind_of` says;
  its ``what`` is the stage, which names the runner for a runner that refuses
  or fails a call). Tokens or logits that differ are ``numerical_mismatch``.
"""

from __future__ import annotations

import copy
import functools
import importlib
import importlib.util
import inspect
import re
import time
from typing import Any, Callable

import torch

from conformance.cases.configs import is_encoder_decoder
from conformance.checks.common.compare import Closeness, assert_close, judge_close, logits_of
from conformance.checks.common.export import split_inputs
from conformance.checks.common.exporter_table import BACKENDS
from conformance.checks.common.generation import single_prompt
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import declared_tolerance
from conformance.fingerprints import Fingerprint, kind_of, mask
from conformance.reasons import innermost, package_path, where
from conformance.tolerances import Tolerance

NEW_TOKENS = 4
# The function that chose the components: a submodule it leaves out is its finding.
DECOMPOSITION_SITE = "transformers.exporters.utils:decompose_for_generation"
REASON_LIMIT = 240
OUTPUT_FLAGS = ("use_cache", "output_attentions", "output_hidden_states", "return_dict", "return_loss")


def runner_options(backend: str) -> dict[str, Any]:
    """The keywords `ExportedModel.to` gives `backend`'s runners (OpenVINO: compiled in float32)."""
    return {key: dict(value) if isinstance(value, dict) else value for key, value in BACKENDS[backend].runner_options}


def load_runners(exported, device, backend: str, metrics: dict) -> dict:
    """The components' runners on `device` with the backend's `runner_options`; OpenVINO's precision recorded
    (`inference_precision`: what the runners compiled in; `default_precision`: the CPU plugin's own default here)."""
    runners = exported.to(device, **runner_options(backend)).runners
    precisions = {inference_precision(runner) for runner in runners.values()} - {""}
    if precisions:
        metrics["inference_precision"] = ",".join(sorted(precisions))
        metrics["default_precision"] = default_precision()
    return runners


def installed(module: str) -> bool:
    """Whether the dotted `module` can be imported here, found without importing it (its parents are imported;
    a missing parent is False)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def has_exporters() -> bool:
    return installed("transformers.exporters")


def require_exporters() -> None:
    if not has_exporters():
        import transformers

        raise NotApplicable(f"no transformers.exporters in transformers {transformers.__version__}")


def exporter_and_config(backend: str, **config: Any):
    """(an exporter instance, its config with `config`) of a backend; the exporter's environment check
    (`validate_environment`) runs here."""
    module = importlib.import_module("transformers.exporters")
    spec = BACKENDS[backend]
    try:
        exporter = getattr(module, spec.exporter)()
    except Exception as exc:
        raise exporter_failure(exc, f"{spec.exporter}()", {}) from exc
    return exporter, getattr(module, spec.config)(**config)


# --- failures -------------------------------------------------------------------------------------


COMPONENT = re.compile(r"failed on component '(\w+)'")
TRANSFORMERS_FILE = re.compile(r'File "([^"]*/transformers/[^"]+)", line (\d+)')


def exporter_failure(exc: BaseException, stage: str, metrics: dict, kind: str = "export_error") -> ContractViolation:
    """`stage[ component]: Type: first line (at transformers/...:N)` of the innermost exception, and its
    fingerprint (kind, its innermost transformers site, exception type, stage)."""
    from conformance.fingerprints import where_of

    component = COMPONENT.search(str(exc))
    if component:
        stage = f"{stage} component {component.group(1)!r}"
    root = innermost(exc, at_repeat=True)
    text = str(root).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), repr(root))
    if len(first) > REASON_LIMIT:
        first = first[: REASON_LIMIT - 3] + "..."
    location = where(root)
    named = TRANSFORMERS_FILE.findall(text)
    if named:
        path, line = named[-1]
        location = f"{package_path(path)}:{line}"
    first += spec_difference(text)
    reason = f"{stage}: {type(root).__name__}: {first}" + (f" (at {location})" if location else "")
    fingerprint = Fingerprint(kind_of(root, kind), where=where_of(root), error=type(root).__name__, what=mask(stage))
    return ContractViolation(reason, metrics, fingerprint)


SPEC_SPLIT = "but actually got inputs with tree spec of:"
SPEC_FIELD = re.compile(r"'(\w+)': ([^,\[\]{}()]+)")


def spec_difference(text: str) -> str:
    """For torch.export's "inputs do not match the traced tree spec": the fields whose values differ (a Python
    scalar of the inputs, baked into the program's spec), e.g. `` (traced cumulative_length_int 17, called with 18)``."""
    if SPEC_SPLIT not in text:
        return ""
    traced, called = ({} for _ in range(2))
    for fields_, part in zip((traced, called), text.split(SPEC_SPLIT, 1)):
        for name, value in SPEC_FIELD.findall(part):
            fields_.setdefault(name, []).append(value.strip())
    changed = [(name, a, b) for name in traced if name in called
               for a, b in zip(traced[name], called[name]) if a != b]
    if not changed:
        return ""
    return " (" + "; ".join(f"traced {name} {a}, called with {b}" for name, a, b in dict.fromkeys(changed)) + ")"


# --- inputs ---------------------------------------------------------------------------------------


def non_padding(logits: torch.Tensor, tensors: dict[str, Any]) -> torch.Tensor | None:
    """The [batch, seq] mask of positions to compare: the attention mask (the decoder's for an encoder-decoder)
    when the logits align with it, else None (every position)."""
    # An encoder-decoder's logits are over the decoder positions: its own mask, if any, says which to compare.
    decoder = any(key.startswith("decoder_") for key in tensors)
    mask_ = tensors.get("decoder_attention_mask" if decoder else "attention_mask")
    if isinstance(mask_, torch.Tensor) and mask_.dim() == 2 and logits.dim() >= 2 and logits.shape[:2] == mask_.shape:
        return mask_.bool()
    return None


def compare_logits(actual: torch.Tensor, expected: torch.Tensor, keep: torch.Tensor | None, tol: Tolerance,
                   what: str, metrics: dict) -> Closeness:
    """assert_close over the kept positions (all when `keep` is None); records `compared_positions`."""
    if actual.shape != expected.shape:
        raise ContractViolation(f"{what}: logits shape {tuple(actual.shape)} != eager {tuple(expected.shape)}",
                                metrics)
    if keep is not None:
        actual, expected = actual[keep], expected[keep]
        metrics["compared_positions"] = int(keep.sum())
    else:
        metrics["compared_positions"] = int(actual.shape[:-1].numel()) if actual.dim() > 1 else 1
    return assert_close(actual, expected, tol, what, metrics)


def prepared(model: torch.nn.Module, inputs: dict[str, Any]) -> dict[str, Any]:
    """What a runner is called with for `inputs`: the output flags dropped and the data-dependent inputs
    precomputed by the exporter's own `precompute_export_inputs`, as `export` prepares its sample."""
    from transformers.exporters.utils import precompute_export_inputs

    ready = {key: value for key, value in inputs.items() if key not in OUTPUT_FLAGS}
    with torch.no_grad():
        precompute_export_inputs(model, ready)
    return ready


def traced_kwargs(runner, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The kwargs of a call the runner's graph was traced with (its constants are the graph's own)."""
    metadata = runner.metadata
    return {key: value for key, value in kwargs.items()
            if key in metadata.kwargs and key not in metadata.in_constants}


def call_runner(runner, kwargs: dict[str, Any], stage: str, metrics: dict):
    try:
        return runner(**traced_kwargs(runner, kwargs))
    except Exception as exc:
        raise exporter_failure(exc, stage, metrics) from exc


# --- forward --------------------------------------------------------------------------------------


def length_variant(case):
    """(name, sample) of a variant of another prompt length (longer first), or (None, why not)."""
    variants = case.variants()
    for name in ("longer", "shorter"):
        if name in variants.available:
            return name, variants.available[name].sample
    return None, variants.unavailable.get("longer", "no other prompt length can be made")


def forward_sample(case, model: torch.nn.Module) -> tuple[dict, dict, dict]:
    """(tensors, constants, fixed flags) of the sample a forward column exports: ``use_cache=False`` where the
    forward takes it."""
    tensors, constants = split_inputs(case.inputs())
    fixed = {"use_cache": False} if "use_cache" in inspect.signature(model.forward).parameters else {}
    return tensors, constants, fixed


def forward_calls(case, tensors: dict, constants: dict, metrics: dict) -> list[tuple[str, dict, dict]]:
    """The calls a forward column serves: the sample, then a variant of another prompt length where one can be
    made (`variant` says which, or why none)."""
    calls = [("sample", tensors, constants)]
    name, other = length_variant(case)
    if name is None:
        metrics["variant"] = f"none: {other}"
    else:
        metrics["variant"] = name
        calls.append((name, *split_inputs(case.inputs(other))))
    return calls


def served_logits(runner, reference: torch.nn.Module, call: tuple[str, dict, dict], fixed: dict, backend: str,
                  metrics: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(the runner's logits, eager `reference`'s, the positions to compare) for one of `forward_calls`."""
    label, tensors, constants = call
    kwargs = prepared(reference, {**tensors, **constants})
    actual = logits_of(call_runner(runner, kwargs, f"{backend} runner on the {label}", metrics))
    with torch.no_grad():
        expected = logits_of(reference(**tensors, **constants, **fixed))
    return actual, expected, non_padding(expected, tensors)


def export_forward(case, backend: str) -> dict:
    require_exporters()
    metrics: dict = {"backend": backend, "dynamic": True}
    model = case.fresh_model().eval()
    tensors, constants, fixed = forward_sample(case, model)
    exporter, config = exporter_and_config(backend, dynamic=True)
    sample = {**tensors, **constants, **fixed}
    started = time.perf_counter()
    try:
        exported = exporter.export(model, copy.copy(sample), config)
    except Exception as exc:
        raise exporter_failure(exc, f"{type(exporter).__name__}.export(dynamic=True)", metrics) from exc
    metrics["export_seconds"] = round(time.perf_counter() - started, 3)
    started = time.perf_counter()
    try:
        runner = load_runners(exported, case.device, backend, metrics)["model"]
    except Exception as exc:
        raise exporter_failure(exc, f"{backend} runner", metrics) from exc
    metrics["runner_seconds"] = round(time.perf_counter() - started, 3)
    reference = case.fresh_model().eval()
    tol = declared_tolerance(case)
    for call in forward_calls(case, tensors, constants, metrics):
        actual, expected, keep = served_logits(runner, reference, call, fixed, backend, metrics)
        compare_logits(actual, expected, keep, tol, f"{backend} runner logits on the {call[0]}", metrics)
    return metrics


def inference_precision(runner) -> str:
    """The precision OpenVINO compiled a runner's model in (``INFERENCE_PRECISION_HINT``); "" for the other
    backends."""
    compiled = getattr(runner, "compiled_model", None)
    if compiled is None:
        return ""
    return short_precision(compiled.get_property("INFERENCE_PRECISION_HINT"))


def short_precision(value) -> str:
    """OpenVINO's element type (``<Type: 'bfloat16'>``) as bf16, f16 or f32."""
    value = str(value)
    value = value.split("'")[1] if "'" in value else value
    return {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}.get(value, value)


def default_precision() -> str:
    """The precision OpenVINO's CPU plugin compiles a float32 model in here when not told (bf16 on a CPU with it)."""
    import openvino

    return short_precision(openvino.Core().get_property("CPU", "INFERENCE_PRECISION_HINT"))


# --- generation -----------------------------------------------------------------------------------


def bound_kwargs(original: Callable, args: tuple, kwargs: dict) -> dict[str, Any]:
    """A call's arguments by name, as the exporter captured its components' inputs (`**kwargs` merged)."""
    signature = inspect.signature(original)
    bound = signature.bind(*args, **kwargs)
    named: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            named.update(value)
        elif kind is not inspect.Parameter.VAR_POSITIONAL:
            named[name] = value
    return named


class RoutedModel:
    """A fresh model whose computation comes from exported components' runners, driven by its own `generate`.

    Each component that is a submodule (``image_encoder``, ``multi_modal_projector``, ``language_model``,
    ``lm_head``...: transformers' own `_find_multimodal_submodules` names them) has its ``forward`` replaced by
    a call of its runner; the model's ``forward`` sends the first call of a `generate` to the ``prefill``
    runner where there is one (else runs the model's own code, whose submodules are routed), and every later
    call to the ``decode`` runner. `routed_calls` counts the runner calls per component; `eager_calls` the
    calls of a submodule transformers names (an encoder, a projector...) that no component covers: there, the
    model's own PyTorch code ran, and the export does not serve the request.
    """

    def __init__(self, model: torch.nn.Module, runners: dict, backend: str, metrics: dict):
        from transformers.exporters.utils import _find_multimodal_submodules

        self.model = model
        self.backend = backend
        self.metrics = metrics
        self.calls = 0
        self.routed_calls: dict[str, int] = dict.fromkeys(runners, 0)
        self.eager_calls: dict[str, int] = {}
        submodules = _find_multimodal_submodules(model)
        for name, module in submodules.items():
            if name not in runners:
                self._count_eager(module, name)
        for name, runner in runners.items():
            if name in ("prefill", "decode"):
                continue
            if name not in submodules:
                raise ContractViolation(f"component {name!r} of export_for_generation is no submodule transformers "
                                        f"names on {type(model).__name__} ({sorted(submodules)})", metrics)
            self._route(submodules[name], name, runner)
        original = model.forward
        prefill, decode = runners.get("prefill"), runners.get("decode")
        if decode is None:
            raise ContractViolation(f"export_for_generation gave no decode component ({sorted(runners)})", metrics)

        @functools.wraps(original)  # generate validates its kwargs against the forward's signature
        def forward(*args, **kwargs):
            first = self.calls == 0
            self.calls += 1
            if first and prefill is None:
                return original(*args, **kwargs)
            name, runner = ("prefill", prefill) if first else ("decode", decode)
            return self._call(name, runner, model, bound_kwargs(original, args, kwargs))

        model.forward = forward

    def _count_eager(self, module: torch.nn.Module, name: str) -> None:
        def counted(*_):
            self.eager_calls[name] = self.eager_calls.get(name, 0) + 1

        module.register_forward_hook(counted)

    def _route(self, module: torch.nn.Module, name: str, runner) -> None:
        original = module.forward

        @functools.wraps(original)
        def forward(*args, **kwargs):
            return self._call(name, runner, module, bound_kwargs(original, args, kwargs))

        module.forward = forward

    def _call(self, name: str, runner, owner: torch.nn.Module, kwargs: dict):
        self.routed_calls[name] += 1
        return call_runner(runner, prepared(owner, kwargs), f"{self.backend} runner of component {name!r}",
                           self.metrics)

    def generate(self, request: dict[str, Any], config, **generate_kwargs):
        self.calls = 0
        with torch.no_grad():
            return self.model.generate(**copy.deepcopy(request), generation_config=copy.deepcopy(config),
                                       **generate_kwargs)


def static_generation_config(model: torch.nn.Module, requests: list[dict[str, Any]]):
    """Greedy decoding of exactly `NEW_TOKENS` tokens over a StaticCache sized for the longest request, the
    logits of every step returned."""
    config = copy.deepcopy(model.generation_config)
    longest = max(int(request["input_ids"].shape[-1]) for request in requests)
    config.update(cache_implementation="static", max_cache_len=longest + NEW_TOKENS + 1, do_sample=False,
                  num_beams=1, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, eos_token_id=None,
                  output_logits=True, return_dict_in_generate=True)
    if config.pad_token_id is None:
        config.pad_token_id = 0
    return config


def requests_of(case) -> tuple[list[tuple[str, dict]], str]:
    """The generation requests (batch 1): the sample's second prompt, and the same prompt at another length
    where a variant can be made; and why not, where not."""
    requests = [("sample", single_prompt(case.inputs()))]
    name, other = length_variant(case)
    if name is None:
        return requests, f"none: {other}"
    requests.append((name, single_prompt(case.inputs(other))))
    return requests, name


def generation_setup(case, metrics: dict) -> tuple[torch.nn.Module, list[tuple[str, dict]], Any]:
    """(a fresh model, the requests, their static generation config) of a generation column; `NotApplicable`
    where transformers has no exporters, for encoder-decoder classes and a model with no ``generate``."""
    require_exporters()
    if is_encoder_decoder(case.tiny.config) or "input_ids" not in case.sample.inputs:
        raise NotApplicable("encoder-decoder generation (no decoder-only prompt ids) is not decomposed by this check")
    requests, metrics["variant"] = requests_of(case)
    model = case.fresh_model().eval()
    if not hasattr(model, "generate"):
        raise NotApplicable(f"{type(model).__name__} has no generate(): nothing for export_for_generation to "
                            "decompose")
    return model, requests, static_generation_config(model, [request for _, request in requests])


def left_out(routed: RoutedModel, metrics: dict, numbers: list[str]) -> ContractViolation:
    """The violation of a decomposition that left a submodule `generate` calls out of its components (`numbers`:
    the numerical verdicts with it run eagerly)."""
    metrics["eager_calls"] = dict(routed.eager_calls)
    return ContractViolation(
        f"export_for_generation left {sorted(routed.eager_calls)} out of its components "
        f"({metrics['components']}), and generate calls them: the exported model cannot serve a request "
        f"without PyTorch (with them run eagerly: {'; '.join(numbers) or 'tokens and logits match eager generate'})",
        metrics, Fingerprint("contract", where=DECOMPOSITION_SITE,
                             what=f"submodules called by generate but not exported: {sorted(routed.eager_calls)}"))


def export_generation(case, backend: str, **backend_config: Any) -> dict:
    metrics: dict = {"backend": backend, "dynamic": True, "new_tokens": NEW_TOKENS, "cache": "static"}
    model, requests, config = generation_setup(case, metrics)
    exporter, export_config = exporter_and_config(backend, dynamic=True, **backend_config)
    started = time.perf_counter()
    try:
        exported = exporter.export_for_generation(model, copy.deepcopy(requests[0][1]), export_config,
                                                  generation_config=config)
    except Exception as exc:
        raise exporter_failure(exc, f"{type(exporter).__name__}.export_for_generation(dynamic=True)",
                               metrics) from exc
    metrics["export_seconds"] = round(time.perf_counter() - started, 3)
    metrics["components"] = sorted(exported.components)
    del model
    try:
        runners = load_runners(exported, case.device, backend, metrics)
    except Exception as exc:
        raise exporter_failure(exc, f"{backend} runners", metrics) from exc
    routed = RoutedModel(case.fresh_model().eval(), runners, backend, metrics)
    reference = case.fresh_model().eval()
    tol = declared_tolerance(case)
    started = time.perf_counter()
    numbers: list[str] = []  # the numerical verdicts while some submodule ran eagerly
    for label, request in requests:
        with torch.no_grad():
            expected = reference.generate(**copy.deepcopy(request), generation_config=copy.deepcopy(config))
        actual = routed.generate(request, config)
        try:
            judge_generation(label, actual, expected, tol, metrics)
        except ContractViolation as exc:
            if not routed.eager_calls:
                raise
            numbers.append(exc.reason)
    metrics["routed_calls"] = routed.routed_calls
    if routed.eager_calls:
        raise left_out(routed, metrics, numbers)
    metrics["generate_seconds"] = round(time.perf_counter() - started, 3)
    return metrics


def judge_generation(label: str, actual, expected, tol: Tolerance, metrics: dict) -> None:
    """Tokens first (what a user sees), then every step's logits within `tol`."""
    tokens, wanted = actual.sequences[:, -NEW_TOKENS:], expected.sequences[:, -NEW_TOKENS:]
    steps = [judge_close(a.float(), e.float(), tol, {}) for a, e in zip(actual.logits, expected.logits)]
    if not torch.equal(tokens, wanted):
        step = int((tokens != wanted).any(0).nonzero()[0])
        raise ContractViolation(
            f"{label}: the tokens generated from the components differ from eager generate at new token {step}: "
            f"{tokens[0].tolist()} vs {wanted[0].tolist()} (logits at that step differ by "
            f"{steps[step].max_abs_diff:.3g})", metrics,
            Fingerprint("numerical_mismatch", what=mask(f"tokens from the components differ at new token {step}")))
    for step, (a, e) in enumerate(zip(actual.logits, expected.logits)):
        found = judge_close(a.float(), e.float(), tol, metrics)
        if not found.within:
            raise ContractViolation(f"{label}: step {step}: logits from the components differ from eager generate "
                                    f"by {found.beyond()}", metrics,
                                    Fingerprint("numerical_mismatch", what=mask("logits from the components differ")))
