"""The quantized exporter columns' reproducers: the script quantizes as the column does and goes as far as the step
the cell's reason names.

The template tests build no model: the case's inputs, requests and generation config are given. The recipe test
builds each quantizer from the script's source and from the check's code and compares them (where the backend's
packages are installed). The published scripts themselves are verified by `conformance findings --verify`.
"""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from conformance.checks.common import exporter_table, exporters
from conformance.report.repro_templates import quantized_checks, template_for
from conformance.report.repro_templates.steps import NoTemplate

pytestmark = pytest.mark.meta

SAMPLE = {"input_ids": torch.ones(1, 5, dtype=torch.long)}
LONGER = {"input_ids": torch.ones(1, 9, dtype=torch.long)}


@pytest.fixture(autouse=True)
def given_case(monkeypatch):
    monkeypatch.setattr(quantized_checks, "forward_inputs", lambda ctx: (dict(SAMPLE), {"use_cache": False}))
    monkeypatch.setattr(exporters, "forward_calls",
                        lambda case, tensors, constants, metrics: [("sample", tensors, constants),
                                                                   ("longer", dict(LONGER), {})])
    monkeypatch.setattr(exporters, "requests_of", lambda case: ([("sample", SAMPLE), ("longer", LONGER)], "longer"))
    monkeypatch.setattr(exporters, "static_generation_config",
                        lambda model, requests: SimpleNamespace(to_diff_dict=lambda: {"max_new_tokens": 4}))


def _steps(check: str, reason: str, kind: str = "export_error"):
    cell = SimpleNamespace(reason=reason, fingerprint={"kind": kind})
    case = SimpleNamespace(fresh_model=lambda: None)
    ctx = SimpleNamespace(cell=cell, kind=kind, check=check, case=case, dtype="float32", fingerprint=cell.fingerprint)
    return template_for(check)(ctx)


def test_every_quantized_column_has_its_template():
    for row in exporter_table.COLUMNS:
        if row.quantizer:
            assert template_for(row.id) is quantized_checks.TEMPLATES[row.part], row.id


@pytest.mark.parametrize("reason", ["export: PT2EQuantizer on dynamo: GuardOnDataDependentSymNode: ...",
                                    "calibrate: PT2EQuantizer on executorch: IndexError: tensors used as indices",
                                    "convert: NNCFTorchFXQuantizer on dynamo: IndexError: tuple index out of range",
                                    "lower: PT2EQuantizer on executorch: RuntimeError: ..."])
def test_a_failure_in_the_export_ends_the_script_at_the_quantized_export(reason):
    steps = _steps("exporter_executorch_pt2e_forward", reason)
    assert steps.body[-1] == "exported = exporter.export(model, dict(inputs, **CONSTANTS), config)"
    assert any("quantizer=quantizer" in line for line in steps.body)
    assert "from transformers.exporters.quantizers import PT2EQuantizer" in steps.imports


def test_a_low_sqnr_is_measured_on_the_request_the_reason_names_in_the_check_s_words():
    steps = _steps("exporter_dynamo_pt2e_forward", "quantize: the logits of the longer are 27.9 dB SQNR from eager "
                   "float's, below the 30 dB floor", "numerical_mismatch")
    text = "\n".join(steps.body)
    assert "request = longer_inputs()" in text and set(steps.requests) == {"longer"}
    assert "quantize: SQNR below the floor" in text and "sqnr_db" in steps.parts
    assert (steps.constants["FLOOR_DB"], steps.constants["CEILING_DB"]) == ("30.0", "98.0")
    on_sample = _steps("exporter_dynamo_pt2e_forward", "quantize: the logits of the sample are 12 dB SQNR",
                       "numerical_mismatch")
    assert "request = inputs" in on_sample.body and on_sample.requests == {}
    left_float = _steps("exporter_onnx_pt2e_forward", "quantize: the quantizer left the model unquantized: the logits "
                        "of the sample are 120 dB SQNR from eager float's, above 98 dB", "numerical_mismatch")
    text = "\n".join(left_float.body)
    assert "quantize: the logits are float's" in text and "below the floor" not in text


def test_an_artifact_no_smaller_is_sized_against_the_float_export():
    steps = _steps("exporter_onnx_ort_dynamic_forward", "quantize: the quantized artifact is no smaller than the "
                   "float one: ...", "contract")
    text = "\n".join(steps.body)
    assert "OnnxExporter().export(tiny_model(), dict(inputs, **CONSTANTS), OnnxConfig(dynamic=True))" in text
    assert "quantize: the artifact is no smaller" in text and steps.parts == ("artifact_bytes",)


def test_generation_calibrates_on_the_request_and_serves_through_the_components():
    run = _steps("exporter_openvino_pt2e_generate", "run: openvino runner of component 'decode': StopIteration")
    text = "\n".join(run.body)
    assert "calibration_dataset=[copy.deepcopy(inputs)]" in text and "route(model, runners)" in text
    assert 'exported.to("cpu", config=' in text and run.body[-1].strip().startswith("logits_processor=")
    left = _steps("exporter_dynamo_pt2e_generate", "export_for_generation left ['image_encoder'] out of its "
                  "components (['decode']), and generate calls them", "contract")
    assert "out of its components" in "\n".join(left.body) and left.body[-4] == "if eager_calls:"


def test_what_the_script_cannot_carry_has_no_script():
    with pytest.raises(NoTemplate, match="names no step"):
        _steps("exporter_openvino_nncf_openvino_forward", "resident memory reached 4367 MiB", "resources")


def _installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def _described(quantizer) -> dict:
    """A quantizer as its class, its config's class and its inner quantizer's class and global config."""
    inner = getattr(quantizer, "quantizer", None)
    return {"class": type(quantizer).__name__, "config": type(getattr(quantizer, "config", None)).__name__,
            "calibration": getattr(quantizer, "calibration_dataset", None),
            "inner": type(inner).__name__, "global": repr(getattr(inner, "global_config", None))}


@pytest.mark.parametrize("row", [r for r in exporter_table.COLUMNS if r.quantizer and r.part == "forward"],
                         ids=lambda row: row.id)
def test_the_script_s_recipe_builds_the_check_s_quantizer(row):
    spec = exporter_table.QUANTIZERS[row.quantizer]
    needs = {*spec.requires, *spec.recipe(row.backend).requires}
    if not _installed("transformers.exporters.quantizers", *needs):
        pytest.skip(f"{', '.join(sorted(needs)) or 'transformers.exporters'} not installed here")
    from conformance.checks.common import quantized

    imports, expression = quantized_checks.quantizer_source(row.id)
    scope: dict = {}
    exec("\n".join(imports), scope)
    from_script = eval(expression, scope)
    from_check = quantized.quantizer_for(row, None, quantized.Steps(True))
    assert _described(from_script) == _described(from_check)
