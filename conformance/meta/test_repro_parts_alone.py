"""The onnx_generate template's two ways to a short reproducer (no model is built: the template's facts are given).

* Prefill logits that differ (a numerical mismatch at the prefill): each part, once exported, is also run in ONNX
  Runtime against the same module run eagerly, the vision part first, so the script raises at the part whose ONNX run
  differs and the verifier's cut drops everything after it.
* A data-dependent error raised outside every export (the reason names no part): a fake tensor the export left in
  the model. Each part is exported, then run eagerly on the exported model and on a fresh one; the fresh model is
  never exported.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conformance.report.repro_templates import export_checks

pytestmark = pytest.mark.meta

FACTS = {"inputs": {}, "owner": "", "vision": ".model", "media": ["pixel_values"], "text": ["attention_mask"],
         "placeholder": 7, "max_len": 21, "kwarg": "past_key_values"}


def _context(kind: str, reason: str, what: str = "") -> SimpleNamespace:
    cell = SimpleNamespace(reason=reason, fingerprint={"kind": kind, **({"what": what} if what else {})})
    return SimpleNamespace(cell=cell, fingerprint=cell.fingerprint, kind=kind, dtype="float32")


@pytest.fixture(autouse=True)
def given_facts(monkeypatch):
    monkeypatch.setattr(export_checks, "generation_facts", lambda ctx: dict(FACTS))


def _index(body: list[str], start: str) -> int:
    return next(i for i, line in enumerate(body) if line.startswith(start))


def test_prefill_logits_that_differ_compare_each_part_alone_vision_first():
    steps = export_checks.onnx_generate(_context(
        "numerical_mismatch", "prefill of the exported parts vs eager generate: logits differ by 0.0005 > 0.0001",
        what="prefill"))
    body = steps.body
    helper = body[_index(body, "def onnx_part"):]
    assert any("same part run eagerly" in line for line in helper[:12])
    vision = _index(body, "onnx_part('vision'")
    assert vision < _index(body, "owner = ") < _index(body, "onnx_part('embed_prefill'")
    assert "media = " not in "".join(body[:vision]), "the vision call takes its media inline: a cut keeps no text"
    assert not [line for line in body if line.startswith("onnx_part('step'")], "the prefill decides: no step part"
    assert any("compared alone" in note for note in steps.notes)


def test_a_tokens_mismatch_keeps_the_whole_pipeline_without_the_part_comparison():
    body = export_checks.onnx_generate(_context(
        "numerical_mismatch", "decode step 2 of the exported parts vs eager generate: logits differ by 1 > 0.1",
        what="decode step #")).body
    assert not any("same part run eagerly" in line for line in body)
    assert _index(body, "owner = ") < _index(body, "onnx_part('vision'")


def test_a_data_dependent_error_outside_every_export_runs_each_part_after_its_export_against_a_fresh_model():
    steps = export_checks.onnx_generate(_context(
        "data_dependent_guard", "DataDependentOutputException: aten.equal.default (at fake_impls.py:1526)"))
    body = steps.body
    calls = [line for line in body if line.startswith("export_then_run(")]
    assert [call.split("'")[1] for call in calls] == ["vision", "embed_prefill", "prefill"]
    assert all("fresh" in call for call in calls), "each part runs on the exported model and on a fresh one"
    exporting = [line for line in body if "onnx_export(" in line]
    assert exporting and not any("fresh" in line for line in exporting), "the fresh model is never exported"
    assert any("torch.equal(after, before)" in line for line in body)


def test_a_data_dependent_error_in_a_parts_export_is_written_up_to_that_export():
    body = export_checks.onnx_generate(_context(
        "data_dependent_guard", "export of part 'prefill' failed: GuardOnDataDependentSymNode: Eq(u0, 1)")).body
    assert not any(line.startswith("export_then_run(") for line in body)
    assert body[-1].startswith("onnx_part('prefill'")
