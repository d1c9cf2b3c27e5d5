"""Quantized exports through `transformers.exporters`: the `exporter_<backend>_<quantizer>_<part>` columns.

Contracts:

* `quantizer_for(row, calibration)` is the quantizer a user of the row's backend passes the export config
  (`exporter_table.QUANTIZERS` and its recipe for that backend: torchao's X86InductorQuantizer or ExecuTorch's
  XNNPACKQuantizer in a `PT2EQuantizer`, an `OnnxRuntimeQuantizer` with its dynamic or static config, an NNCF
  quantizer with its quantization or weight-compression config), calibrating on `calibration` (None: the
  export's own sample, transformers' documented fallback), made step-aware (`Steps`).
* `Steps` says which step of a quantized export is running, so that a failure names it: ``export`` (the float
  graph's torch.export, and for a quantizer of the converted model the backend's conversion of it), inside the
  quantizer's ``quantize`` ``prepare`` (before it reads a calibration sample), ``calibrate`` (while it reads
  them; for generation also the capture of each component's calibration inputs from the request) and
  ``convert`` (after the last one, or all of a data-free recipe), then ``lower`` (the backend's conversion of
  the quantized graph: the re-export, ONNX translation, ExecuTorch lowering, OpenVINO conversion and state
  folding); each component of `export_for_generation` starts again at ``export``. A failure's reason starts
  with its step, then the exporter's own first line (`exporters.exporter_failure`); its fingerprint's ``what``
  starts with it too. After the export: ``load`` (the runners), ``run`` (a call), ``quantize`` (the numbers or
  the size say the quantizer did not quantize, or destroyed the model).
* `export_forward(case, row)`: a fresh model exported with the row's quantizer (``Config(dynamic=True,
  quantizer=...)``, before any eager call), its runner called on the sample and on a variant of another prompt
  length (the second request: not calibrated on); each call's logits against a plain eager float forward
  (non-padding positions) have an SQNR within `tolerances.sqnr_bounds` (`judge_sqnr`), and the saved artifact is
  smaller than the same export's without the quantizer (`judge_size`).
* `export_generation(case, row)`: `export_for_generation` with the quantizer, calibrated on the traced request
  (transformers captures each component's inputs from it); another fresh instance routed to the components'
  runners (`exporters.RoutedModel`) generates each request made to follow eager float ``generate``'s tokens
  (`FollowTokens`: a quantized model's argmax may differ, and later steps would be other prefixes); every
  step's logits against eager's within the SQNR band, the saved components smaller than the float export's,
  and no submodule that ``generate`` calls left out of the components (as the float column).
* Top-1 agreement with eager is recorded (`top1_agreement`), never judged: with random weights the logits are
  nearly flat, and any quantization noise reorders them.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Iterator

import torch

from conformance import tolerances
from conformance.checks.common import exporters
from conformance.checks.common.exporter_table import QUANTIZERS, Column
from conformance.checks.common.outcome import ContractViolation
from conformance.fingerprints import Fingerprint, mask

DATA_FREE_STEP = "convert"


class Steps:
    """Which step of a quantized export is running (see the module); `step` is the one a failure names."""

    def __init__(self, calibrates: bool):
        self.calibrates = calibrates
        self.step = "export"

    def quantizing(self) -> None:
        self.step = "prepare" if self.calibrates else DATA_FREE_STEP

    def samples(self, samples: Iterable[Any]) -> Iterator[Any]:
        """`samples`, the step ``calibrate`` while they are read and ``convert`` once all are."""
        self.step = "calibrate"
        yield from samples
        self.step = "convert"


class Samples:
    """A calibration set that tells `steps` when it is read (re-iterable, as transformers' `CalibrationSet` is)."""

    def __init__(self, samples: list, steps: Steps):
        self.samples, self.steps = list(samples), steps

    def __len__(self) -> int:
        return len(self.samples)

    def __iter__(self) -> Iterator[Any]:
        return self.steps.samples(self.samples)


def tracked(quantizer, steps: Steps):
    """`quantizer`, its class made to report its steps to `steps` (a subclass: `with_calibration`'s copies for
    the components of `export_for_generation` keep it)."""
    base = type(quantizer)

    def quantize(self, model, sample_inputs, export_format):
        steps.quantizing()
        self.calibration_dataset = Samples(self.calibration_dataset or [sample_inputs], steps)
        result = base.quantize(self, model, sample_inputs, export_format)
        steps.step = "lower"
        return result

    quantizer.__class__ = type(base.__name__, (base,), {"quantize": quantize, "__module__": base.__module__})
    return quantizer


def recipe_quantizer(recipe: str, calibration: list | None):
    """The `transformers.exporters` quantizer of a recipe (`exporter_table.RECIPES`), as its docs call it."""
    q = importlib.import_module("transformers.exporters.quantizers")
    if recipe == "x86_int8":
        from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
            X86InductorQuantizer, get_default_x86_inductor_quantization_config)

        return q.PT2EQuantizer(X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()),
                               calibration_dataset=calibration)
    if recipe == "xnnpack_int8":
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer, get_symmetric_quantization_config)

        return q.PT2EQuantizer(XNNPACKQuantizer().set_global(get_symmetric_quantization_config()),
                               calibration_dataset=calibration)
    if recipe == "ort_dynamic_int8":
        return q.OnnxRuntimeQuantizer(q.OnnxRuntimeDynamicConfig())
    if recipe == "ort_static_int8":
        return q.OnnxRuntimeQuantizer(q.OnnxRuntimeStaticConfig(), calibration_dataset=calibration)
    raise KeyError(f"no quantizer recipe {recipe!r}")


def quantizer_for(row: Column, calibration: list | None, steps: Steps):
    """The row's quantizer with its backend's recipe, calibrating on `calibration`, reporting to `steps`."""
    spec = QUANTIZERS[row.quantizer]
    recipe = dict(spec.recipes)[row.backend]
    if spec.cls.startswith("NNCF"):
        q = importlib.import_module("transformers.exporters.quantizers")
        config = q.NNCFWeightCompressionConfig() if recipe == "nncf_weights_int8" else q.NNCFQuantizationConfig()
        quantizer = getattr(q, spec.cls)(config, calibration_dataset=calibration)
    else:
        quantizer = recipe_quantizer(recipe, calibration)
    return tracked(quantizer, steps)


# --- failures, sizes, numbers ---------------------------------------------------------------------


def at_step(step: str, violation: ContractViolation) -> ContractViolation:
    """`violation` with its reason and fingerprint's ``what`` starting with `step`."""
    fingerprint = violation.fingerprint
    if fingerprint is not None:
        fingerprint = dataclasses.replace(fingerprint, what=mask(f"{step}: {fingerprint.what}"))
    return ContractViolation(f"{step}: {violation.reason}", violation.metrics, fingerprint)


def artifact_bytes(exported) -> int:
    """The bytes of an export's saved programs (`save_pretrained`; its JSON manifest and configs left out)."""
    with tempfile.TemporaryDirectory(prefix="quantized-") as directory:
        exported.save_pretrained(directory)
        return sum(path.stat().st_size for path in Path(directory).rglob("*")
                   if path.is_file() and path.suffix != ".json")


def sqnr_db(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """``20 log10(|expected| / |actual - expected|)`` in float64; inf where they are equal."""
    expected, actual = expected.double(), actual.double()
    noise = torch.linalg.vector_norm(actual - expected)
    if noise == 0:
        return float("inf")
    return float(20 * torch.log10(torch.linalg.vector_norm(expected) / noise))


def record_sqnr(label: str, actual: torch.Tensor, expected: torch.Tensor, metrics: dict) -> float:
    """The SQNR of one served request, recorded per request (`sqnr_by_request`) and as the worst (`sqnr_db`);
    top-1 agreement recorded, never judged."""
    value = sqnr_db(actual, expected)
    metrics.setdefault("sqnr_by_request", {})[label] = round(value, 2)
    metrics["sqnr_db"] = min(metrics.get("sqnr_db", value), round(value, 2))
    agree = (actual.argmax(-1) == expected.argmax(-1)).double().mean()
    metrics["top1_agreement"] = round(min(metrics.get("top1_agreement", 1.0), float(agree)), 3)
    return value


def unused_weight_bytes(exported) -> int:
    """The bytes of the weights no node of a component's `torch.export` program uses (0 for other programs): what
    a quantized graph re-exported with its float parameters still attached carries for nothing."""
    found = 0
    for component in exported.components.values():
        program = component.program
        signature = getattr(program, "graph_signature", None)
        if signature is None or not hasattr(program, "state_dict"):
            continue
        names = {**signature.inputs_to_parameters, **signature.inputs_to_buffers}
        for node in program.graph.nodes:
            if node.op == "placeholder" and node.name in names and not node.users:
                tensor = program.state_dict.get(names[node.name])
                found += 0 if tensor is None else tensor.numel() * tensor.element_size()
    return found


def judge(case, metrics: dict) -> None:
    """The contract's numbers: every request's SQNR within the band, the artifact smaller than the float one."""
    bounds = tolerances.sqnr_bounds(str(case.dtype), "quantized")
    metrics["sqnr_floor_db"], metrics["sqnr_ceiling_db"] = bounds.floor_db, bounds.ceiling_db
    worst = min(metrics["sqnr_by_request"].items(), key=lambda item: item[1])
    best = max(metrics["sqnr_by_request"].items(), key=lambda item: item[1])
    size = f"the artifact is {metrics['quantized_bytes']} bytes, the float export's {metrics['float_bytes']}"
    if metrics.get("unused_weight_bytes"):
        size += f", {metrics['unused_weight_bytes']} bytes of it weights no node uses"
    if worst[1] < bounds.floor_db:
        raise ContractViolation(
            f"quantize: the logits of the {worst[0]} are {worst[1]} dB SQNR from eager float's, below the "
            f"{bounds.floor_db:g} dB floor: the quantization destroyed the model ({size})", metrics,
            Fingerprint("numerical_mismatch", what="quantize: SQNR below the floor"))
    if best[1] > bounds.ceiling_db:
        raise ContractViolation(
            f"quantize: the quantizer left the model unquantized: the logits of the {best[0]} are {best[1]} dB "
            f"SQNR from eager float's, above {bounds.ceiling_db:g} dB: no 8-bit quantization on their path ({size})",
            metrics, Fingerprint("numerical_mismatch", what="quantize: the logits are float's"))
    if metrics["quantized_bytes"] >= metrics["float_bytes"]:
        raise ContractViolation(f"quantize: the quantized artifact is no smaller than the float one: {size}", metrics,
                                Fingerprint("contract", what="quantize: the artifact is no smaller"))


# --- the export, step by step ---------------------------------------------------------------------


def exporter_with_steps(row: Column, steps: Steps, **config: Any):
    """(exporter, config) of the row's backend; each component it exports starts at step ``export``."""
    exporter, export_config = exporters.exporter_and_config(row.backend, dynamic=True, **config)
    export_component = exporter._export_component

    def component(*args, **kwargs):
        steps.step = "export"
        return export_component(*args, **kwargs)

    exporter._export_component = component
    return exporter, export_config


def quantized_export(row: Column, export, metrics: dict, calibration: list | None):
    """Run `export(exporter, config)` with the row's quantizer; a failure names its step. Records
    `export_seconds`."""
    steps = Steps(QUANTIZERS[row.quantizer].recipe(row.backend).calibrates)
    metrics.update(quantizer=row.quantizer, recipe=dict(QUANTIZERS[row.quantizer].recipes)[row.backend])
    started = time.perf_counter()
    try:
        if calibration is not None:
            calibration = Samples(calibration, steps)
        exporter, config = exporter_with_steps(row, steps, quantizer=quantizer_for(row, calibration, steps))
        exported = export(exporter, config)
    except ContractViolation as violation:
        raise at_step(steps.step, violation) from violation
    except Exception as exc:
        stage = f"{steps.step}: {QUANTIZERS[row.quantizer].cls} on {row.backend}"
        raise exporters.exporter_failure(exc, stage, metrics) from exc
    metrics["export_seconds"] = round(time.perf_counter() - started, 3)
    return exported


def float_size(row: Column, export, metrics: dict) -> None:
    """The same export without the quantizer: `float_bytes` (and `size_ratio`); its failure is the row's too."""
    started = time.perf_counter()
    try:
        exporter, config = exporters.exporter_and_config(row.backend, dynamic=True)
        metrics["float_bytes"] = artifact_bytes(export(exporter, config))
    except Exception as exc:
        raise exporters.exporter_failure(exc, f"quantize: the float export to size against, on {row.backend}",
                                         metrics) from exc
    metrics["float_export_seconds"] = round(time.perf_counter() - started, 3)
    metrics["size_ratio"] = round(metrics["quantized_bytes"] / metrics["float_bytes"], 4)


def sizes(exported, metrics: dict) -> None:
    metrics["quantized_bytes"] = artifact_bytes(exported)
    metrics["unused_weight_bytes"] = unused_weight_bytes(exported)


def runners_of(exported, case, row: Column, metrics: dict) -> dict:
    try:
        return exporters.load_runners(exported, case.device, row.backend, metrics)
    except Exception as exc:
        raise exporters.exporter_failure(exc, f"load: {row.backend} runners", metrics) from exc


def export_forward(case, row: Column) -> dict:
    exporters.require_exporters()
    metrics: dict = {"backend": row.backend, "dynamic": True}
    model = case.fresh_model().eval()
    tensors, constants, fixed = exporters.forward_sample(case, model)
    sample = {**tensors, **constants, **fixed}

    def export(exporter, config):
        return exporter.export(model, copy.copy(sample), config)

    exported = quantized_export(row, export, metrics, calibration=None)
    sizes(exported, metrics)
    runner = runners_of(exported, case, row, metrics)["model"]
    reference = case.fresh_model().eval()
    for call in exporters.forward_calls(case, tensors, constants, metrics):
        try:
            actual, expected, keep = exporters.served_logits(runner, reference, call, fixed, row.backend, metrics)
        except ContractViolation as violation:
            raise at_step("run", violation) from violation
        if keep is not None:
            actual, expected = actual[keep], expected[keep]
        record_sqnr(call[0], actual, expected, metrics)
    model = case.fresh_model().eval()
    float_size(row, export, metrics)
    judge(case, metrics)
    return metrics


class FollowTokens:
    """A logits processor that makes ``generate`` take `tokens` ([batch, new]) step by step; the raw logits
    (``output_logits``) stay the model's own."""

    def __init__(self, tokens: torch.Tensor):
        self.tokens, self.step = tokens, 0

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        forced = torch.full_like(scores, float("-inf"))
        forced.scatter_(1, self.tokens[:, self.step: self.step + 1], 0.0)
        self.step += 1
        return forced


def export_generation(case, row: Column) -> dict:
    from transformers import LogitsProcessorList

    metrics: dict = {"backend": row.backend, "dynamic": True, "new_tokens": exporters.NEW_TOKENS, "cache": "static"}
    model, requests, config = exporters.generation_setup(case, metrics)
    traced = requests[0][1]

    def export(exporter, export_config):
        return exporter.export_for_generation(model, copy.deepcopy(traced), export_config, generation_config=config)

    exported = quantized_export(row, export, metrics, calibration=[copy.deepcopy(traced)])
    metrics["components"] = sorted(exported.components)
    sizes(exported, metrics)
    routed = exporters.RoutedModel(case.fresh_model().eval(), runners_of(exported, case, row, metrics), row.backend,
                                   metrics)
    reference = case.fresh_model().eval()
    started = time.perf_counter()
    for label, request in requests:
        with torch.no_grad():
            expected = reference.generate(**copy.deepcopy(request), generation_config=copy.deepcopy(config))
        follow = FollowTokens(expected.sequences[:, -exporters.NEW_TOKENS:])
        try:
            actual = routed.generate(request, config, logits_processor=LogitsProcessorList([follow]))
        except ContractViolation as violation:
            raise at_step("run", violation) from violation
        record_sqnr(label, torch.stack(actual.logits).float(), torch.stack(expected.logits).float(), metrics)
    metrics["routed_calls"] = routed.routed_calls
    metrics["generate_seconds"] = round(time.perf_counter() - started, 3)
    if routed.eager_calls:
        raise exporters.left_out(routed, metrics, [f"SQNR {metrics['sqnr_db']} dB"])
    model = case.fresh_model().eval()
    float_size(row, export, metrics)
    judge(case, metrics)
    return metrics
