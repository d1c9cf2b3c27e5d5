"""Planted-bug self-tests of the quantized exporter columns (`exporter_<backend>_<quantizer>_<part>`).

For each quantized column: a correct model with weights worth quantizing (`WideLM`: `planted.TinyLM` with a
wide MLP) passes with the row's own quantizer (SQNR within the band, the artifact smaller than the float one),
or fails with exactly a known upstream failure (`KNOWN`); three planted quantizers, taking the row's place,
fail it naming their step: one that leaves the graph unquantized (`quantize`: the logits are float's, the
artifact no smaller), one that destroys it (`quantize`: SQNR below the floor) and one whose calibration forward
raises (`calibrate`). A planted quantizer replaces the row's own, so the rows of one (backend, part) run one path:
the bugs are planted on the first row of each (`ONE_PER_PATH`, 8 columns). Columns whose packages are not installed are skipped with the install command (the
``[quantized]`` extra); where transformers has no ``transformers.exporters`` every column is n.a.
"""

from __future__ import annotations

import pytest
import torch

from conformance.checks.common import exporter_table, exporters, quantized
from conformance.checks.common.outcome import run_check
from conformance.checks.common.registry import load_all
from conformance.meta import planted
from conformance.meta.test_checks_exporters import exporter_ready, installed, one_thread  # noqa: F401 (fixture)

pytestmark = [pytest.mark.meta, planted.NEEDS_TRANSFORMERS_5,
              pytest.mark.skipif(not exporters.has_exporters(),
                                 reason="the installed transformers has no transformers.exporters")]

load_all()
QUANTIZED = [row.id for row in exporter_table.COLUMNS if row.quantizer]
# A planted quantizer takes the row's own quantizer's place: the rows of one backend and part then run the same
# path, so the planted bugs run on one row of each (backend, part), the first in column order.
ONE_PER_PATH = list({(row.backend, row.part): row.id for row in reversed(exporter_table.COLUMNS) if row.quantizer}
                    .values())
WIDTH = 512
# The correct model's known failures per column, each a verdict of the column on it (measured 2026-12-05, nncf
# 3.4, torchao 0.18, executorch 1.5): the reason must contain one of the strings. `DEAD_WEIGHTS`: DynamoExporter
# re-exports the quantized GraphModule with the float parameters it replaced still attached (no node uses them),
# so its .pt2 is larger than the float one. `MASKED_SCORES`: a static activation recipe quantizes the attention
# scores per tensor, and TinyLM masks them with `finfo.min` before the softmax (as transformers' eager attention
# does): the scale that must span it leaves nothing of the scores (SQNR 2-7 dB). `NNCF_FX`: NNCF's Torch FX
# statistics collection raises on an integer output of the graph (`isempty` of an int), or its int8 meets the
# masked scores. `XNNPACK_INDICES`: XNNPACKQuantizer's annotation makes the embedding's indices float.
# `NNCF_FX_LOWERING`: see below.
DEAD_WEIGHTS = ("weights no node uses",)
MASKED_SCORES = ("below the 30 dB floor",)
NNCF_FX = ("Function `isempty` is not implemented", "below the 30 dB floor")
XNNPACK_INDICES = ("calibrate: PT2EQuantizer on executorch",)
# ExecuTorch lowering NNCF's weight-compressed graph: `t()` of a 3D tensor (torch._refs:t).
NNCF_FX_LOWERING = ("lower: NNCFTorchFXQuantizer on executorch",)
KNOWN = {"exporter_dynamo_pt2e_forward": DEAD_WEIGHTS, "exporter_dynamo_pt2e_generate": MASKED_SCORES,
         "exporter_onnx_pt2e_generate": MASKED_SCORES,
         "exporter_executorch_pt2e_forward": XNNPACK_INDICES, "exporter_executorch_pt2e_generate": XNNPACK_INDICES,
         "exporter_onnx_ort_static_forward": MASKED_SCORES, "exporter_onnx_ort_static_generate": MASKED_SCORES,
         "exporter_openvino_nncf_openvino_forward": MASKED_SCORES,  # the longer prompt, not calibrated on: 15 dB
         "exporter_onnx_nncf_onnx_forward": MASKED_SCORES, "exporter_onnx_nncf_onnx_generate": MASKED_SCORES,
         **{f"exporter_executorch_nncf_fx_{part}": NNCF_FX_LOWERING for part in exporter_table.PARTS},
         **{f"exporter_{backend}_nncf_fx_{part}": NNCF_FX
            for backend in ("dynamo", "onnx", "openvino") for part in exporter_table.PARTS}}


class WideLM(planted.TinyLM):
    """`TinyLM` with a residual MLP of width `WIDTH`: weights enough that int8 makes the artifact smaller than
    the graph's own description grows."""

    def __init__(self, config=None):
        super().__init__(config)
        self.up = torch.nn.Linear(planted.HIDDEN, WIDTH)
        self.down = torch.nn.Linear(WIDTH, planted.VOCAB)
        torch.nn.init.normal_(self.up.weight, std=0.5)
        torch.nn.init.normal_(self.down.weight, std=0.05)

    def adjust(self, logits, decode, cache):
        return logits + self.down(torch.relu(self.up(logits[..., : planted.HIDDEN])))


def stateful_decode(check_id: str, outcome) -> bool:
    """Whether `outcome` is OpenVINO's known generation failure, for every model and every export, quantized or
    not (`test_checks_exporters.STATEFUL_DECODE`): its stateful decode runner's `unflatten` raises
    `StopIteration` at a `transformers.exporters.runners` site."""
    if not (check_id.startswith("exporter_openvino_") and check_id.endswith("_generate")):
        return False
    if outcome.verdict != "fail" or "StopIteration" not in outcome.reason:
        return False
    assert outcome.reason.startswith("run: "), outcome.reason
    assert outcome.fingerprint.where.startswith("transformers.exporters.runners."), outcome.fingerprint
    return True


def planted_quantizer(quantize):
    """An FX-graph `ExportQuantizer` every backend takes, whose `quantize` is `quantize(graph, calibration)`."""
    from transformers.exporters.configs import ExportFormat
    from transformers.exporters.quantizers import ExportQuantizer

    class Planted(ExportQuantizer):
        quantizes_fx_graph = True
        supported_formats = tuple(ExportFormat)

        def quantize(self, model, sample_inputs, export_format):
            return quantize(model, self.traced_calibration(sample_inputs))

    return Planted()


def unquantized(graph, calibration):
    for _ in calibration:
        pass
    return graph


def destroyed(graph, calibration):
    for _ in calibration:
        pass
    with torch.no_grad():  # every weight's sign flipped (no torch factory: an exporter may patch them meanwhile)
        for parameter in graph.parameters():
            if parameter.is_floating_point():
                parameter.neg_()
    return graph


def calibration_raises(graph, calibration):
    for inputs in calibration:
        graph(**inputs)
        raise RuntimeError("planted: the calibration forward failed")
    return graph


# (planted quantize, the step and words its reason must name)
BUGS = {"unquantized": (unquantized, ["quantize: the quantizer left the model unquantized", "above 98 db"]),
        "destroyed": (destroyed, ["quantize: the logits of the", "below the 30 db floor"]),
        "calibration_raises": (calibration_raises, ["calibrate: ", "planted: the calibration forward failed"])}


@pytest.mark.parametrize("check_id", QUANTIZED)
def test_the_correct_model_passes(check_id):
    installed(check_id)
    outcome = run_check(check_id, planted.case_for(exporter_ready(WideLM)))
    metrics = outcome.metrics
    if stateful_decode(check_id, outcome):
        return
    if check_id in KNOWN and outcome.verdict == "fail":
        assert any(known in outcome.reason for known in KNOWN[check_id]), outcome.reason
        return
    assert outcome.verdict == "pass", outcome.reason
    assert metrics["sqnr_floor_db"] <= metrics["sqnr_db"] <= metrics["sqnr_ceiling_db"], metrics
    assert metrics["quantized_bytes"] < metrics["float_bytes"], metrics
    assert len(metrics["sqnr_by_request"]) == 2, metrics  # the second request served too


# The sign-flipping planted quantizer does not reach the numbers of the dynamo and ONNX generation components
# (their logits stay float's: the cell fails, but as unquantized): which tensors those components compute with is
# not yet found. Strict, so that the day it reaches them the marker must go.
UNREACHED = {("exporter_dynamo_pt2e_generate", "destroyed"), ("exporter_onnx_pt2e_generate", "destroyed")}


@pytest.mark.parametrize("bug", sorted(BUGS))
@pytest.mark.parametrize("check_id", ONE_PER_PATH)
def test_a_planted_quantizer_bug_fails_naming_its_step(check_id, bug, monkeypatch, request):
    installed(check_id)
    if (check_id, bug) in UNREACHED:
        request.applymarker(pytest.mark.xfail(strict=True, reason="the planted sign flip does not reach these "
                                                                  "components' weights (see UNREACHED)"))
    quantize, words = BUGS[bug]
    monkeypatch.setattr(quantized, "quantizer_for",
                        lambda row, calibration, steps: quantized.tracked(planted_quantizer(quantize), steps))
    outcome = run_check(check_id, planted.case_for(exporter_ready(WideLM)))
    assert outcome.verdict == "fail", f"{bug} gave {outcome.verdict} on {check_id}: {outcome.reason}"
    if bug != "calibration_raises" and stateful_decode(check_id, outcome):
        return  # served nothing to judge: the float column's known failure, before the numbers
    reason = outcome.reason.lower()
    missing = [w for w in words if w.lower() not in reason]
    assert not missing, f"reason {outcome.reason!r} does not name {missing}"
    assert outcome.fingerprint is not None and outcome.fingerprint.kind != "harness_error", outcome.fingerprint
    assert outcome.fingerprint.what.startswith(words[0].split(":")[0]), outcome.fingerprint


def test_every_quantizer_backend_pair_transformers_declares_is_a_row():
    """Each quantizer class of `transformers.exporters.quantizers` on each backend its `supported_formats` names
    has a forward and a generate row (NNCF's two OpenVINO recipes and ONNX Runtime's two configs included)."""
    from transformers.exporters import quantizers

    pairs = {(q.cls, backend) for q in exporter_table.QUANTIZERS.values() for backend, _ in q.recipes}
    for name in ("PT2EQuantizer", "OnnxRuntimeQuantizer", "NNCFOpenVINOQuantizer", "NNCFOnnxQuantizer",
                 "NNCFTorchFXQuantizer"):
        declared = {str(f.value) if hasattr(f, "value") else str(f) for f in getattr(quantizers, name).supported_formats}
        assert {(name, b) for b in declared} <= pairs, (name, declared)
    rows = {(row.quantizer, row.backend, row.part) for row in exporter_table.COLUMNS if row.quantizer}
    assert rows == {(q.name, b, p) for q in exporter_table.QUANTIZERS.values() for b, _ in q.recipes
                    for p in exporter_table.PARTS}
