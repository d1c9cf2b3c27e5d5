"""Reproducer templates of the `exporter_<backend>_forward` / `exporter_<backend>_generate` columns (the rows of
`checks.common.exporter_table`): transformers' own exporters (`conformance.report.repro_templates.steps` states
what a template is); `TEMPLATES` is the template of each row, by its part.

The script calls what a person deploying the model calls: ``<Backend>Exporter().export(model, inputs,
Config(dynamic=True))`` or ``export_for_generation(...)`` with the suite's static-cache generation config, then
(past an export that succeeds) the backend's runners on the sample, against eager, with the check's words; a
generation is driven by the model's own `generate` with its components routed to their runners
(`repro_parts.route`). A failure on the check's second request (a prompt of another length) is not
written: the script carries one request.
"""

from __future__ import annotations

import inspect

from conformance.checks.common import exporter_table
from conformance.report.repro_templates.common import (PASSED, constants_source, exporter_call, exporter_import,
                                                       generation_settings, runner_options_source,
                                                       tolerance_constants)
from conformance.report.repro_templates.steps import Context, NoTemplate, Steps

SECOND_REQUEST = ("on the longer", "on the shorter", "longer:", "shorter:")


def _backend(ctx: Context) -> str:
    return exporter_table.column(ctx.check).backend


def _second_request(ctx: Context) -> None:
    if any(marker in ctx.cell.reason for marker in SECOND_REQUEST):
        raise NoTemplate("the failure is on the check's second request (a prompt of another length), which the "
                         "script does not carry")


def exporter_forward(ctx: Context) -> Steps:
    from conformance.checks.common import exporters
    from conformance.checks.common.export import split_inputs

    _second_request(ctx)
    backend = _backend(ctx)
    tensors, constants = split_inputs(ctx.case.inputs())
    model = ctx.case.fresh_model()
    if "use_cache" in inspect.signature(model.forward).parameters:
        constants = {**constants, "use_cache": False}
    body = ["inputs = sample_inputs()",
            "model = tiny_model()",
            f"exporter, config = {exporter_call(backend)}(dynamic=True)",
            "exported = exporter.export(model, dict(inputs, **CONSTANTS), config)"]
    if ".export(" not in ctx.cell.reason.split(":", 1)[0]:
        body += [f'runner = exported.to("cpu"{runner_options_source(backend)}).runners["model"]',
                 "reference = tiny_model()",
                 "actual = logits_of(runner(**runner_kwargs(runner, reference, dict(inputs, **CONSTANTS))))",
                 "with torch.no_grad():",
                 "    expected = logits_of(reference(**inputs, **CONSTANTS))",
                 'mask2d = inputs.get("decoder_attention_mask", inputs.get("attention_mask"))',
                 "if mask2d is not None and mask2d.dim() == 2 and expected.shape[:2] == mask2d.shape:",
                 "    actual, expected = actual[mask2d.bool()], expected[mask2d.bool()]  # the non-padding positions",
                 f'what = "{backend} runner logits on the sample"',
                 "within, beyond = close(actual, expected, ATOL, RTOL)",
                 "if not within:",
                 '    raise AssertionError(f"{what}: logits differ from eager by {beyond}")']
    return Steps(body, parts=("runner_kwargs", "close", "logits_of"), imports=(exporter_import(backend),),
                 inputs=tensors,
                 constants={"CONSTANTS": constants_source(constants, PASSED), **tolerance_constants(ctx, "export")},
                 notes=[f"{exporters.BACKENDS[backend].exporter}.export(dynamic=True) and its runner on the sample "
                        "(the check also calls it on a prompt of another length)"])


def exporter_generate(ctx: Context) -> Steps:
    from conformance.checks.common import exporters

    _second_request(ctx)
    backend = _backend(ctx)
    requests, _ = exporters.requests_of(ctx.case)
    config = exporters.static_generation_config(ctx.case.fresh_model(), [r for _, r in requests])
    settings = generation_settings(config)
    body = ["inputs = sample_inputs()  # batch 1: the sample's second prompt, its padding removed",
            "config = tiny_model().generation_config",
            "config.update(**GENERATION)",
            f"exporter, export_config = {exporter_call(backend)}(dynamic=True)",
            "exported = exporter.export_for_generation(tiny_model(), dict(inputs), export_config, "
            "generation_config=config)"]
    if "export_for_generation(" not in ctx.cell.reason.split(":", 1)[0]:
        body += [f'runners = exported.to("cpu"{runner_options_source(backend)}).runners',
                 "model = tiny_model()",
                 "eager_calls = route(model, runners)",
                 "with torch.no_grad():",
                 "    actual = model.generate(**copy.deepcopy(inputs), generation_config=copy.deepcopy(config))",
                 "if eager_calls:",
                 '    raise AssertionError(f"export_for_generation left {sorted(set(eager_calls))} '
                 'out of its components "',
                 '                         f"({sorted(exported.components)}), and generate calls them (the "',
                 f"                         {'components chosen by ' + exporters.DECOMPOSITION_SITE + ')'!r})",
                 "with torch.no_grad():",
                 "    expected = tiny_model().generate(**inputs, generation_config=config)",
                 "tokens, wanted = actual.sequences[:, -NEW_TOKENS:], expected.sequences[:, -NEW_TOKENS:]",
                 "if not torch.equal(tokens, wanted):",
                 "    step = int((tokens != wanted).any(0).nonzero()[0])",
                 '    raise AssertionError(f"tokens from the components differ at new token {step} from eager "',
                 '                         f"generate: {tokens[0].tolist()} vs {wanted[0].tolist()}")',
                 "for step, (a, e) in enumerate(zip(actual.logits, expected.logits)):",
                 "    within, beyond = close(a.float(), e.float(), ATOL, RTOL)",
                 "    if not within:",
                 '        raise AssertionError(f"step {step}: logits from the components differ '
                 'from eager generate by {beyond}")']
    parts = ("route", "close")
    if len(body) > 10 and (ctx.kind not in ("numerical_mismatch", "contract") or "out of its components" in
                           ctx.cell.reason):  # it fails in the routed generate: no eager reference after it
        body = body[:10 if ctx.kind not in ("numerical_mismatch", "contract") else 14]
        parts = ("route",)
    return Steps(body, imports=("import copy", exporter_import(backend)), parts=parts, inputs=requests[0][1],
                 constants={"GENERATION": constants_source(settings, PASSED),
                            "NEW_TOKENS": repr(exporters.NEW_TOKENS), **tolerance_constants(ctx, "export")},
                 notes=[f"{exporters.BACKENDS[backend].exporter}.export_for_generation(dynamic=True) over the check's "
                        "static cache, greedy; one request (the check also generates for a prompt of another "
                        "length)"])


TEMPLATES = {"forward": exporter_forward, "generate": exporter_generate}  # a row's part -> its template
