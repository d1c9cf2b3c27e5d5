"""What the reproducer templates share: the suite's tolerances and where a sub-module sits in a model.

Contracts:

* `tolerance_constants(ctx, backend)` is the script's ``ATOL`` and ``RTOL``: the suite's tolerance table's row for the
  run's dtype and `backend` (`conformance.tolerances`).
* `constants_source(value, what)` is the source of the plain inputs a check passes or bakes into its program
  (`NoTemplate`, naming `what`, when one cannot be written); `forward_inputs(ctx)` is (tensors, constants) as
  export_forward passes a sample: plain values baked in, ``use_cache=False`` where the model takes it.
* How a script calls transformers' exporters: `exporter_call(backend)` (``Exporter(), Config``),
  `exporter_import(backend)`, `runner_options_source(backend)` (the check's `ExportedModel.to` keywords) and
  `generation_settings(config)` (the generation config's keys the exporter columns set).
* `module_path(model, module)` is ``.a.b`` of a sub-module (``model.a.b`` in the script), "" for the model
  itself; `NoTemplate` when `module` is not one of the model's.
"""

from __future__ import annotations

import torch

from conformance import tolerances
from conformance.report.repro_templates.steps import Context, NoTemplate
from conformance.report.repro_values import literal


def tolerance_constants(ctx: Context, backend: str) -> dict[str, str]:
    """The script's ``ATOL`` and ``RTOL`` constants: the table's row for the run's dtype and `backend`."""
    tol = tolerances.tolerance(ctx.dtype, backend)
    return {"ATOL": repr(tol.atol), "RTOL": repr(tol.rtol)}


PASSED = "an input the check passes"  # `constants_source`'s words for the inputs an exporter is handed


def constants_source(value: dict, what: str = "an input the check bakes into the program") -> str:
    try:
        return literal(value)
    except ValueError as exc:
        raise NoTemplate(f"{what} cannot be written: {exc}") from None


def forward_inputs(ctx: Context, inputs: dict | None = None) -> tuple[dict, dict]:
    """(tensors, constants) as export_forward passes them: plain values baked in, use_cache=False."""
    from conformance.checks.common.export import accepts, split_inputs

    tensors, constants = split_inputs(ctx.case.inputs() if inputs is None else inputs)
    if accepts(ctx.case.fresh_model(), "use_cache"):
        constants = {**constants, "use_cache": False}
    return tensors, constants


def module_path(model: torch.nn.Module, module: torch.nn.Module) -> str:
    """`.a.b` of a sub-module (`model.a.b` in the script), "" for the model itself."""
    if module is model:
        return ""
    for name, found in model.named_modules():
        if found is module:
            return "." + name
    raise NoTemplate(f"the decoding module ({type(module).__name__}) is not a sub-module of the model")


EXPORTERS = {"dynamo": ("DynamoExporter", "DynamoConfig"), "onnx": ("OnnxExporter", "OnnxConfig"),
             "executorch": ("ExecutorchExporter", "ExecutorchConfig"),
             "openvino": ("OpenVINOExporter", "OpenVINOConfig")}  # a backend -> transformers' exporter and config
GENERATION_KEYS = ("cache_implementation", "max_cache_len", "do_sample", "num_beams", "max_new_tokens",
                   "min_new_tokens", "eos_token_id", "output_logits", "return_dict_in_generate", "pad_token_id")


def exporter_call(backend: str) -> str:
    """``Exporter(), Config`` of `backend` as call source (the caller adds the config's arguments)."""
    exporter, config = EXPORTERS[backend]
    return f"{exporter}(), {config}"


def exporter_import(backend: str) -> str:
    return f"from transformers.exporters import {', '.join(EXPORTERS[backend])}"


def runner_options_source(backend: str) -> str:
    """The check's `ExportedModel.to` keywords for `backend` as call source (OpenVINO: compiled in float32)."""
    from conformance.checks.common.exporters import runner_options

    return "".join(f", {key}={value!r}" for key, value in runner_options(backend).items())


def generation_settings(config) -> dict:
    """The keys of a generation config the exporter columns set (`GENERATION_KEYS`), as the script's constant."""
    return {k: v for k, v in config.to_diff_dict().items() if k in GENERATION_KEYS}
