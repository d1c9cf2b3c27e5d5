"""Numerical contracts that scale with what they compare: atol + rtol * |expected|, recorded, and read back.

Rounding on large logits never fails a cell; a real cache or export defect
(FSMT's 0.015, LED's 0.0097, NllbMoe's 0.0168 on logits of magnitude ~1)
still does; a static cache that stores values wrong by 0.01% in one layer is
caught by its contents even where the scores cannot show it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from transformers import LlamaForCausalLM
from transformers.cache_utils import StaticCache

from conformance import tolerances
from conformance.checks.common import registry
from conformance.checks.common.compare import assert_close, closeness, judge_close
from conformance.checks.common.outcome import ContractViolation, run_check
from conformance.meta.test_checks_compile import llama_factory, prompt_inputs, synthetic_case
from conformance.report import render, summary, truth

EAGER = tolerances.tolerance("float32", "eager")


def test_the_table_keeps_the_absolute_values_and_adds_torch_testings_rtol():
    assert (EAGER.atol, EAGER.rtol) == (1e-5, 1.3e-6)
    assert tolerances.tolerance("float32", "export").atol == 1e-4
    assert tolerances.tolerance("float32", "inductor").atol == 1e-4
    assert tolerances.tolerance("bfloat16", "eager") == tolerances.Tolerance(1e-2, 1.6e-2)
    assert tolerances.tolerance("torch.float16", "export") == tolerances.Tolerance(1e-2, 1e-3)


def test_rounding_on_large_logits_passes_and_the_same_difference_on_small_ones_fails():
    expected = torch.full((2, 4), 12.0)
    rounding = closeness(expected + 1.14e-5, expected, EAGER)  # MT5's static_cache case: allowed 1e-5 + 1.56e-5
    assert rounding.within and 0.4 < rounding.ratio < 0.5
    small = closeness(torch.full((2, 4), 0.1) + 1.14e-5, torch.full((2, 4), 0.1), EAGER)
    assert not small.within and small.ratio > 1.0


@pytest.mark.parametrize("defect", [0.015, 0.0097, 0.0168])
def test_real_defects_still_fail(defect):
    expected = torch.linspace(-1.0, 1.0, 16).reshape(2, 8)
    found = closeness(expected + defect, expected, EAGER)
    assert not found.within


def test_nan_fails_and_equal_infinities_differ_by_nothing():
    expected = torch.tensor([1.0, -math.inf])
    assert closeness(torch.tensor([1.0, -math.inf]), expected, EAGER).ratio == 0.0
    assert not closeness(torch.tensor([math.nan, -math.inf]), expected, EAGER).within
    assert not closeness(torch.tensor([1.0, 0.0]), expected, EAGER).within


def test_a_cell_records_its_worst_ratio_and_the_tolerance_it_was_judged_with():
    metrics: dict = {}
    judge_close(torch.ones(3) + 5e-6, torch.ones(3), EAGER, metrics)
    judge_close(torch.ones(3) + 1e-6, torch.ones(3), EAGER, metrics)  # a better step keeps the worst
    assert metrics["atol"] == 1e-5 and metrics["rtol"] == 1.3e-6
    assert 0.4 < metrics["worst_ratio"] < 0.5
    assert 4e-6 < metrics["max_abs_diff"] < 6e-6
    with pytest.raises(ContractViolation) as raised:
        assert_close(torch.ones(3) + 1e-3, torch.ones(3), EAGER, "decode step 1", metrics)
    assert "decode step 1: logits differ from eager by 0.001 > 1" in raised.value.reason
    assert raised.value.fingerprint.kind == "numerical_mismatch"


def test_a_check_judges_with_the_tolerance_it_declares_else_its_cells_backend(monkeypatch):
    monkeypatch.setattr(registry, "CHECKS", dict(registry.load_all()))
    judged = {}

    @registry.check("declares_export", column=998, tolerance="export")
    def declares_export(case):
        judged["declares_export"] = registry.declared_tolerance(case)
        return {}

    @registry.check("declares_none", column=999)
    def declares_none(case):
        judged["declares_none"] = registry.declared_tolerance(case)
        return {}

    case = SimpleNamespace(dtype=torch.float32, backend="inductor", seed=0)
    assert run_check("declares_export", case).verdict == "pass"
    assert run_check("declares_none", case).verdict == "pass"
    assert judged == {"declares_export": tolerances.tolerance("float32", "export"),
                      "declares_none": tolerances.tolerance("float32", "inductor")}
    with pytest.raises(RuntimeError, match="outside a running check"):
        registry.declared_tolerance(case)


LOOKUP = re.compile(r"\.tol\(|tolerances\.tolerance\(|from conformance\.tolerances import [^\n]*\btolerance\b")


def test_a_check_asks_for_its_declared_tolerance_and_looks_up_no_other():
    """`registry.declared_tolerance` is the one lookup of the checks (a check never names a backend's tolerance
    in its body beside its declaration)."""
    checks = Path(registry.__file__).resolve().parents[1]
    looking = sorted(str(path.relative_to(checks)) for path in checks.rglob("*.py") if LOOKUP.search(path.read_text()))
    assert looking == ["common/registry.py"]


def _envelope(cells: dict) -> dict:
    env = {"transformers": "5.24.0", "torch": "2", "device": "cpu", "dtype": "float32", "backend": "eager"}
    info = {"static_cache": {"column": 40, "observes": [], "compares": ["max_abs_diff"], "tolerance": "eager"}}
    return {"schema": "vlm-conformance/1", "environment": env, "checks": ["static_cache"], "check_info": info,
            "summary": {}, "models": {"AForConditionalGeneration": {"cells": cells}}}


def test_truth_reads_the_recorded_judgement():
    judged = {"verdict": "pass", "metrics": {"max_abs_diff": 1.4e-5, "worst_ratio": 0.55, "atol": 1e-5,
                                             "rtol": 1.3e-6}}
    assert truth.breaches(_envelope({"static_cache": judged})) == []  # beyond atol, within the rule
    beyond = {**judged, "metrics": {**judged["metrics"], "worst_ratio": 1.2}}
    assert [b.metric for b in truth.breaches(_envelope({"static_cache": beyond}))] == ["worst_ratio"]
    looser = {**judged, "metrics": {**judged["metrics"], "atol": 1e-3}}
    assert [b.metric for b in truth.breaches(_envelope({"static_cache": looser}))] == ["atol"]


def test_the_summary_names_cells_near_the_edge():
    cells = {"static_cache": {"verdict": "pass", "metrics": {"worst_ratio": 0.8}}}
    envelope = _envelope(cells)
    assert summary.near_edge(envelope) == [("AForConditionalGeneration", "static_cache", "pass", 0.8)]
    assert any(line.startswith("near the edge (1)") for line in summary.summary_lines(envelope))
    cells["static_cache"]["metrics"]["worst_ratio"] = 0.1
    assert summary.near_edge(envelope) == []
    failing = {"static_cache": {"verdict": "xfail", "observed": "fail", "metrics": {"worst_ratio": 1.5}}}
    assert [c[3] for c in summary.near_edge(_envelope(failing))] == [1.5]
    otherwise = {"static_cache": {"verdict": "xfail", "observed": "fail", "metrics": {"worst_ratio": 0.0}}}
    assert summary.near_edge(_envelope(otherwise)) == []  # it failed on something else than the comparison


def test_the_published_matrix_page_names_cells_near_the_edge_and_comparisons_without_a_ratio():
    near = {"static_cache": {"verdict": "pass", "metrics": {"max_abs_diff": 1e-6, "worst_ratio": 0.8}}}
    section = "\n".join(render.failures_section(_envelope(near)))
    assert "### Near the edge (within 2x of the tolerance) (1)" in section
    assert "AForConditionalGeneration / `static_cache`: worst ratio 0.80" in section
    older = {"static_cache": {"verdict": "pass", "metrics": {"max_abs_diff": 1e-6}}}  # published before the ratio
    section = "\n".join(render.failures_section(_envelope(older)))
    assert "(0)" in section.split("### Near the edge")[1].splitlines()[0]
    assert "Compared without a recorded worst ratio" in section and "`static_cache` 1" in section


class ValueSkewStaticLlama(LlamaForCausalLM):
    """A static cache whose prefill stores the values of its last layer 0.01% too large: the scores barely move."""

    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        ids = kwargs.get("input_ids")
        if isinstance(cache, StaticCache) and ids is not None and ids.shape[1] > 1:
            cache.layers[-1].values.mul_(1.0001)
        return out


def test_static_cache_compares_the_cache_contents_and_catches_what_the_scores_cannot_show():
    clean = run_check("static_cache", synthetic_case(llama_factory(), prompt_inputs()))
    assert clean.verdict == "pass", clean.reason
    assert clean.metrics["cache_compared"] > 0 and clean.metrics["cache_worst_ratio"] <= 1.0
    assert (clean.metrics["cache_atol"], clean.metrics["cache_rtol"]) == tolerances.CACHE
    skewed = run_check("static_cache", synthetic_case(llama_factory(ValueSkewStaticLlama), prompt_inputs()))
    assert skewed.verdict == "fail", skewed.reason
    assert "the static cache's values of self-attention layer" in skewed.reason
    assert skewed.metrics["worst_ratio"] <= 1.0  # the scores alone would have passed it
