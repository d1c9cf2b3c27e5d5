"""aoti_forward's reproducers: the template writes the check's steps up to the failing one, and the verifier judges
a group keyed by its words (an AOTI package's ``load: ...`` / ``run: ...``, no frame) by those words.

No model is built and nothing is compiled: the template gets a context whose inputs are given; the verifier reads a
printed traceback. The published scripts themselves are verified by `conformance findings --verify`.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from conformance.meta.test_repro import _group, _printed
from conformance.report import findings, repro_verify
from conformance.report.repro_templates import aoti_checks
from conformance.report.repro_templates.steps import NoTemplate

pytestmark = pytest.mark.meta


@pytest.fixture(autouse=True)
def given_inputs(monkeypatch):
    monkeypatch.setattr(aoti_checks, "forward_inputs",
                        lambda ctx: ({"input_ids": torch.ones(1, 5, dtype=torch.long)}, {"use_cache": False}))


def _context(reason: str, dynamic=None) -> SimpleNamespace:
    cell = SimpleNamespace(reason=reason, fingerprint={"kind": "export_error"})
    return SimpleNamespace(cell=cell, fingerprint=cell.fingerprint, kind="export_error",
                           metrics={"dynamic": dynamic or {"input_ids": [1]}})


def _steps(reason: str):
    return aoti_checks.aoti_forward(_context(reason))


def test_the_script_ends_at_the_step_that_failed():
    loaded = _steps("load: RuntimeError: Could not find schema for transformers::grouped_mm_fallback.")
    assert loaded.body[-1].startswith("serve_fresh(package, inputs)") and "serve_fresh" in loaded.parts
    assert any("aoti_compile_and_package" in line for line in loaded.body)
    assert loaded.constants["DYNAMIC"] == "{'input_ids': [1]}"
    compiled = _steps("compile: torch._inductor.aoti_compile_and_package failed: LoweringException: ...")
    assert compiled.body[-1].startswith("torch._inductor.aoti_compile_and_package")
    assert "serve_fresh" not in compiled.parts
    exported = _steps("export: torch.export.export(strict=False) with input_ids dim 1 dynamic: ...")
    assert exported.body[-1].lstrip().startswith("program = torch.export.export(")
    assert _steps("run: call traced: RuntimeError: expected size 64==64, stride 1==16 at dim=1").body[-1] \
        .startswith("serve_fresh(")


@pytest.mark.parametrize("reason", ["compare: longer: the package's logits differ from eager by 1 > 0.0001",
                                    "run: call longer: RuntimeError: index out of bounds"])
def test_what_is_decided_over_the_suites_variants_has_no_script(reason):
    with pytest.raises(NoTemplate):
        _steps(reason)


def test_a_group_keyed_by_words_is_judged_by_its_masked_words(tmp_path):
    script = (str(tmp_path / "repro.py"), 9, "<module>")
    group = _group("export_error", "run: expected size #==#, stride #==# at dim=#", ("RuntimeError",),
                   check="aoti_forward")
    assert findings.site_in(group) == "no code site"
    printed = _printed([script], "RuntimeError", "run: expected size 64==64, stride 1==16 at dim=1")
    same = repro_verify.Run(1, 0.1, printed)
    assert repro_verify.judge(group, same, "aoti_forward") == (True, "")
    other = repro_verify.Run(1, 0.1, _printed([script], "RuntimeError", "load: Could not find schema for x::y"))
    reproduces, why = repro_verify.judge(group, other, "aoti_forward")
    assert not reproduces and "words" in why


def test_a_template_that_cannot_write_its_cell_hands_on_to_the_next_check(tmp_path, monkeypatch):
    """A group whose representative is an aoti_forward cell the template cannot write (the model's own forward
    fails, no AOTI step) keeps the script another check's template writes."""
    from conformance.report import repro

    def refuse(ctx):
        raise NoTemplate("not an AOTI step")

    group = _group("exception", "transformers.y:f", ("ValueError",), check="aoti_forward")
    group.cells.append(findings.FailingCell("M", "build", "fail", "fail", "", 0.5, dict(group.cells[0].fingerprint),
                                            "", 0))
    templates = {"aoti_forward": refuse, "build": lambda ctx: SimpleNamespace(notes=[])}
    monkeypatch.setattr(repro, "template_for", templates.get)
    monkeypatch.setattr(repro, "build_context", lambda group, cell, envelope: SimpleNamespace(check=cell.check))
    monkeypatch.setattr(repro, "render_script", lambda ctx, steps, envelope: ("print('script')\n", ""))
    monkeypatch.setattr(repro, "entry", lambda group: SimpleNamespace(why="", script="", notes=[], model="",
                                                                       check=""))
    written = repro.write_one(group, [{}], tmp_path)
    assert (written.check, written.why, written.script) == ("build", "", f"{group.id}.py")
    templates["build"] = refuse
    refused = repro.write_one(group, [{}], tmp_path)
    assert (refused.check, refused.why, refused.script) == ("aoti_forward", "not an AOTI step", "")


def test_a_vision_part_that_fails_in_its_package_is_written_as_that_part_alone(monkeypatch):
    facts = {"inputs": {}, "vision": ".model.vision", "media": ["pixel_values"]}
    monkeypatch.setattr(aoti_checks, "generation_facts", lambda ctx: dict(facts))
    steps = aoti_checks.aoti_generate(_context("run: part vision: RuntimeError: index out of bounds: 0 <= tmp9 < 16L"))
    assert any(line.startswith("program = export_part(VisionPart(model.model.vision)") for line in steps.body)
    assert steps.body[-1].startswith("serve_fresh(package, media)")
    for reason in ("run: part prefill: RuntimeError: expected size 11==15", "compare: traced: logits differ"):
        with pytest.raises(NoTemplate):
            aoti_checks.aoti_generate(_context(reason))
    dynamic = _context("run: part vision: RuntimeError: x")
    dynamic.metrics["dynamic_parts"] = ["vision"]
    with pytest.raises(NoTemplate, match="dynamic"):
        aoti_checks.aoti_generate(dynamic)
