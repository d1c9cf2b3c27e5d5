"""Reproducer templates of the quantized exporter columns (`exporter_<backend>_<quantizer>_<part>`, the rows of
`checks.common.exporter_table` with a quantizer); `TEMPLATES` is the template of each part.

The script quantizes as a person deploying the model does: the row's quantizer built with its backend's recipe
(`RECIPE_SOURCES`, the source of what `checks.common.quantized.recipe_quantizer` / `quantizer_for` build; a meta
test builds both and compares them), passed as ``Config(dynamic=True, quantizer=...)`` to the backend's exporter's
``export`` or ``export_for_generation`` (calibrated on the traced request there, as the check does). Then it goes
as far as the step the cell's reason names (`checks.common.quantized.Steps`): a failure in ``export``,
``prepare``, ``calibrate``, ``convert`` or ``lower`` is the export call itself; ``load`` the runners; ``run`` a
call (the request the reason names); ``quantize`` the measure that failed, in the check's words: the SQNR of the
request the reason names against eager float, or the saved artifact against the float export's. A generation
failure that leaves a component out is the float column's contract, said in its words.
"""

from __future__ import annotations

import re

from conformance.checks.common import exporter_table
from conformance.report.repro_templates.common import (EXPORTERS, PASSED, constants_source, exporter_call,
                                                       exporter_import, forward_inputs, generation_settings,
                                                       runner_options_source)
from conformance.report.repro_templates.steps import Context, NoTemplate, Steps

STEPS = ("export", "prepare", "calibrate", "convert", "lower", "load", "run", "quantize")  # the first five: export

# The recipes of `exporter_table.RECIPES` as source: (imports beyond transformers', the quantizer's expression).
RECIPE_SOURCES = {
    "x86_int8": (("from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (\n"
                  "    X86InductorQuantizer, get_default_x86_inductor_quantization_config)",),
                 "PT2EQuantizer(X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())"
                 "{calibration})"),
    "xnnpack_int8": (("from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (\n"
                      "    XNNPACKQuantizer, get_symmetric_quantization_config)",),
                     "PT2EQuantizer(XNNPACKQuantizer().set_global(get_symmetric_quantization_config()){calibration})"),
    "ort_dynamic_int8": ((), "OnnxRuntimeQuantizer(OnnxRuntimeDynamicConfig())"),
    "ort_static_int8": ((), "OnnxRuntimeQuantizer(OnnxRuntimeStaticConfig(){calibration})"),
    "nncf_int8": ((), "{cls}(NNCFQuantizationConfig(){calibration})"),
    "nncf_weights_int8": ((), "{cls}(NNCFWeightCompressionConfig(){calibration})"),
}
TRANSFORMERS_NAMES = re.compile(r"\b(PT2EQuantizer|OnnxRuntime\w*|NNCF\w*)\(")


def quantizer_source(check: str, calibration: str = "") -> tuple[tuple[str, ...], str]:
    """(imports, expression) of the row's quantizer with its backend's recipe; `calibration` the source of its
    calibration set ("": none given, transformers calibrates on the export's own sample)."""
    row = exporter_table.column(check)
    spec = exporter_table.QUANTIZERS[row.quantizer]
    imports, expression = RECIPE_SOURCES[dict(spec.recipes)[row.backend]]
    expression = expression.format(cls=spec.cls, calibration=f", calibration_dataset={calibration}"
                                   if calibration else "")
    names = sorted(set(TRANSFORMERS_NAMES.findall(expression)))
    return (f"from transformers.exporters.quantizers import {', '.join(names)}", *imports), expression


def _step(ctx: Context) -> str:
    """The step the reason names; ``run`` for a component left out (found while serving); ``save`` for an error
    the check raised unnamed (`checks.common.quantized`: only saving the artifact to size it runs unguarded)."""
    step = ctx.cell.reason.split(":", 1)[0].strip()
    if step in STEPS:
        return step
    if "out of its components" in ctx.cell.reason:
        return "run"
    if ctx.kind == "exception":
        return "save"
    raise NoTemplate(f"the reason names no step of the quantized export ({step[:60]!r})")


def _request(ctx: Context, labels: list[str]) -> str:
    """The request a ``run`` or ``quantize`` failure names ("sample" when it names none)."""
    named = [label for label in labels if f"the {label}" in ctx.cell.reason or f"the logits of the {label}"
             in ctx.cell.reason]
    return named[0] if named else "sample"


def _sqnr_lines(ctx: Context, label: str, what: str) -> list[str]:
    """The bound the cell failed: the floor, or the ceiling of logits left float (`quantized.judge`'s words)."""
    if "unquantized" in ctx.cell.reason:
        return ["sqnr = sqnr_db(actual, expected)  # against eager float's logits",
                "if sqnr > CEILING_DB:",
                f'    raise AssertionError(f"quantize: the logits are float\'s: {{sqnr:.2f}} dB on the {label}{what} "',
                '                         f"(above {CEILING_DB} dB: not quantized)")']
    return ["sqnr = sqnr_db(actual, expected)  # against eager float's logits",
            "if sqnr < FLOOR_DB:",
            f'    raise AssertionError(f"quantize: SQNR below the floor: {{sqnr:.2f}} dB on the {label}{what} "',
            '                         f"(floor {FLOOR_DB} dB)")']


def _size_lines(float_export: str) -> list[str]:
    return ["quantized_bytes = artifact_bytes(exported)",
            f"float_bytes = artifact_bytes({float_export})",
            "if quantized_bytes >= float_bytes:",
            '    raise AssertionError(f"quantize: the artifact is no smaller: {quantized_bytes} bytes quantized, "',
            '                         f"{float_bytes} bytes the float export")']


def _bounds(ctx: Context) -> dict[str, str]:
    from conformance import tolerances

    bounds = tolerances.sqnr_bounds(ctx.dtype, "quantized")
    return {"FLOOR_DB": repr(bounds.floor_db), "CEILING_DB": repr(bounds.ceiling_db)}


BEFORE_SERVING = {"save": ("artifact_bytes",), "load": ()}  # steps that end before a request: their parts


def _before_serving(step: str, backend: str) -> list[str]:
    """The lines after the export of a failure in saving the artifact or loading its runners."""
    if step == "save":
        return ["artifact_bytes(exported)  # save_pretrained, as the check sizes it"]
    return [f'exported.to("cpu"{runner_options_source(backend)})']


def quantized_forward(ctx: Context) -> Steps:
    from conformance.checks.common import exporters

    step, backend = _step(ctx), exporter_table.column(ctx.check).backend
    tensors, constants = forward_inputs(ctx)
    calls = exporters.forward_calls(ctx.case, tensors, constants, {})
    label = _request(ctx, [name for name, _, _ in calls])
    imports, quantizer = quantizer_source(ctx.check)
    body = ["inputs = sample_inputs()",
            "model = tiny_model()",
            f"quantizer = {quantizer}",
            f"exporter, config = {exporter_call(backend)}(dynamic=True, quantizer=quantizer)",
            "exported = exporter.export(model, dict(inputs, **CONSTANTS), config)"]
    parts: tuple[str, ...] = ()
    requests = {}
    if label != "sample":
        _, other, other_constants = next(call for call in calls if call[0] == label)
        if any(constants.get(key) != value for key, value in other_constants.items()):
            raise NoTemplate(f"the {label} request passes other plain values than the sample")
        requests[label] = other
    request = "inputs" if label == "sample" else f"{label}_inputs()"
    if step in BEFORE_SERVING:
        body, parts = body + _before_serving(step, backend), BEFORE_SERVING[step]
    elif step == "run" or (step == "quantize" and "no smaller" not in ctx.cell.reason):
        body += [f'runner = exported.to("cpu"{runner_options_source(backend)}).runners["model"]',
                 "reference = tiny_model()",
                 f"request = {request}",
                 "actual = logits_of(runner(**runner_kwargs(runner, reference, dict(request, **CONSTANTS))))"]
        parts = ("runner_kwargs", "logits_of")
        if step == "quantize":
            body += ["with torch.no_grad():",
                     "    expected = logits_of(reference(**request, **CONSTANTS))",
                     'mask2d = request.get("decoder_attention_mask", request.get("attention_mask"))',
                     "if mask2d is not None and mask2d.dim() == 2 and expected.shape[:2] == mask2d.shape:",
                     "    actual, expected = actual[mask2d.bool()], expected[mask2d.bool()]  # non-padding positions",
                     *_sqnr_lines(ctx, label, "")]
            parts += ("sqnr_db",)
    elif step == "quantize":
        exporter, config = EXPORTERS[backend]
        body += _size_lines(f"{exporter}().export(tiny_model(), dict(inputs, **CONSTANTS), {config}(dynamic=True))")
        parts = ("artifact_bytes",)
    used = "\n".join(body)
    return Steps(body, parts=parts, imports=(exporter_import(backend), *imports), inputs=tensors,
                 requests={k: v for k, v in requests.items() if f"{k}_inputs()" in used},
                 constants={"CONSTANTS": constants_source(constants, PASSED), **_bounds(ctx)},
                 notes=[f"{exporter_table.QUANTIZERS[exporter_table.column(ctx.check).quantizer].cls} with the "
                        f"{backend} recipe, through {exporters.BACKENDS[backend].exporter}.export(dynamic=True); the "
                        f"failing step: {step}"])


def quantized_generate(ctx: Context) -> Steps:
    from conformance.checks.common import exporters

    step, backend = _step(ctx), exporter_table.column(ctx.check).backend
    requests, _ = exporters.requests_of(ctx.case)
    label = _request(ctx, [name for name, _ in requests])
    config = exporters.static_generation_config(ctx.case.fresh_model(), [r for _, r in requests])
    settings = generation_settings(config)
    imports, quantizer = quantizer_source(ctx.check, "[copy.deepcopy(inputs)]")
    body = ["inputs = sample_inputs()  # batch 1: the sample's second prompt, its padding removed",
            "config = tiny_model().generation_config",
            "config.update(**GENERATION)",
            f"quantizer = {quantizer}",
            f"exporter, export_config = {exporter_call(backend)}(dynamic=True, quantizer=quantizer)",
            "exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, "
            "generation_config=config)"]
    parts: tuple[str, ...] = ()
    more = {label: dict(requests)[label]} if label != "sample" else {}
    left_out = "out of its components" in ctx.cell.reason
    if step in BEFORE_SERVING:
        body, parts = body + _before_serving(step, backend), BEFORE_SERVING[step]
    elif step == "run" or left_out or (step == "quantize" and "no smaller" not in ctx.cell.reason):
        request = "inputs" if label == "sample" else f"{label}_inputs()"
        body += [f'runners = exported.to("cpu"{runner_options_source(backend)}).runners',
                 "model = tiny_model()",
                 "eager_calls = route(model, runners)",
                 f"request = {request}",
                 "with torch.no_grad():",
                 "    expected = tiny_model().generate(**copy.deepcopy(request), generation_config=copy.deepcopy(config))",
                 "    follow = ForceTokens(expected.sequences[:, -NEW_TOKENS:])  # eager float's tokens",
                 "    actual = model.generate(**copy.deepcopy(request), generation_config=copy.deepcopy(config),",
                 "                            logits_processor=LogitsProcessorList([follow]))"]
        parts = ("route", "ForceTokens")
        if left_out:
            body += ["if eager_calls:",
                     '    raise AssertionError(f"export_for_generation left {sorted(set(eager_calls))} out of its '
                     'components "',
                     '                         f"({sorted(exported.components)}), and generate calls them (the "',
                     f"                         {'components chosen by ' + exporters.DECOMPOSITION_SITE + ')'!r})"]
        elif step == "quantize":
            body += ["actual, expected = torch.stack(actual.logits).float(), torch.stack(expected.logits).float()",
                     *_sqnr_lines(ctx, label, ", every step")]
            parts += ("sqnr_db",)
    elif step == "quantize":
        exporter, export_config = EXPORTERS[backend]
        body += _size_lines(f"{exporter}().export_for_generation(tiny_model(), copy.deepcopy(inputs), "
                            f"{export_config}(dynamic=True), generation_config=config)")
        parts = ("artifact_bytes",)
    used = "\n".join(body)
    processors = ("from transformers import LogitsProcessorList",) if "LogitsProcessorList" in used else ()
    return Steps(body, parts=parts, imports=("import copy", *processors, exporter_import(backend), *imports),
                 inputs=requests[0][1], requests={k: v for k, v in more.items() if f"{k}_inputs()" in used},
                 constants={"GENERATION": constants_source(settings, PASSED),
                            "NEW_TOKENS": repr(exporters.NEW_TOKENS), **_bounds(ctx)},
                 notes=[f"{exporter_table.QUANTIZERS[exporter_table.column(ctx.check).quantizer].cls} with the "
                        f"{backend} recipe, calibrated on the request, through "
                        f"{exporters.BACKENDS[backend].exporter}.export_for_generation(dynamic=True) over the "
                        f"check's static cache; the failing step: {step}"])


TEMPLATES = {"forward": quantized_forward, "generate": quantized_generate}  # a row's part -> its template
