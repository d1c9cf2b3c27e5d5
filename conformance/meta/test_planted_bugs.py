"""Adversarial self-tests: for every check, one synthetic model per kind of bug the check claims to catch.

Each planted model (`conformance.meta.planted`) carries exactly one bug. Its
cell for the check under test must be `fail` with a reason that names the
bug (the asserted substrings are the substance of the reason, not its
wording around it); the correct model (`TinyLM`) must pass every check. A
check that cannot catch a bug it claims to is a gap of that check: fix the
check, or, where the check is not ours to change in this branch, mark the
case xfail(strict=True) with the gap as its reason.
"""

from __future__ import annotations

import pytest
import torch

from conformance.checks.common.outcome import run_check
from conformance.checks.common.registry import load_all, unavailable
from conformance.meta import planted

load_all()

pytestmark = planted.NEEDS_TRANSFORMERS_5

# (check, planted model, with media, substrings every one of which the reason must contain)
PLANTED = [
    ("build", "MediaUnusedLM", True, ["pixel_values", "media path is not used"]),
    ("build", "NonFiniteLM", True, ["not finite"]),
    ("build", "RaisingLM", True, ["the planted model cannot run"]),
    ("compile_prefill", "PrefillGraphBreakLM", False, ["fullgraph compile failed", "print", "planted.py:"]),
    ("compile_prefill", "DataDependentLM", False, ["fullgraph compile failed", "data-dependent branching"]),
    ("compile_prefill", "LockedLM", False, ["fullgraph compile failed", "context manager", "planted.py:"]),
    ("compile_prefill", "SetupOnFirstCallLM", False, ["call order changes the verdict",
                                                      "compiled after an eager call: pass"]),
    ("compile_prefill", "CompiledNumericsLM", False, ["compiled logits differ from eager by 0.001"]),
    ("compile_dynamic", "LengthSpecialisedLM", False, ["prompt length cannot be dynamic", "input_ids dim 1",
                                                       "specialised to 8", "planted.py:", "in forward"]),
    ("compile_decode", "WrongSlotLM", False, ["decode step 1", "static-cache logits differ"]),
    ("compile_decode", "StaleCacheLM", False, ["decode step 2", "static-cache logits differ"]),
    ("compile_decode", "HalvingCacheLM", False, ["forward without cache", "the cache returns wrong values"]),
    ("compile_decode", "CompiledNumericsLM", False, ["decode step 1", "differ from eager dynamic-cache decoding by 0.001"]),
    ("compile_decode", "StaticNumericsLM", False, ["decode step 1", "by 0.001"]),
    ("compile_decode", "RecompilingLM", False, ["recompiled after the first step", "self.calls"]),
    ("compile_decode", "DecodeGraphBreakLM", False, ["compiled decode failed", "print", "planted.py:"]),
    ("static_cache", "WrongSlotLM", False, ["diverges from the dynamic cache at new token 1"]),
    ("static_cache", "StaleCacheLM", False, ["scores differ from the dynamic cache's at new token 2",
                                             "while the tokens agree"]),
    ("static_cache", "StaticNumericsLM", False, ["scores differ from the dynamic cache's at new token 1 by 0.001",
                                                 "while the tokens agree", "float64 witness: 0.001"]),
    ("legacy_cache", "TupleDroppingLM", False, ["raw legacy tuple", "accepted silently"]),
    ("legacy_cache", "ConvertedCacheNumericsLM", False, ["decode step 1 from DynamicCache", "by 0.001"]),
    ("export_forward", "DataDependentLM", False, ["torch.export.export(strict=False)", "data-dependent"]),
    ("export_forward", "ExportedNumericsLM", False, ["loaded program (first call)", "by 0.001"]),
    ("export_forward", "StatefulLM", False, ["loaded program (second call)"]),
    ("export_dynamic", "LengthSpecialisedLM", False, ["fewer text tokens per prompt", "input_ids dim 1",
                                                      "specialised to 8", "planted.py:", "in forward"]),
    ("export_forward_strict", "LockedLM", False, ["torch.export.export(strict=True)", "context manager"]),
    ("export_forward_strict", "ExportedNumericsLM", False, ["loaded program (first call)", "by 0.001"]),
    ("export_forward_strict", "StatefulLM", False, ["loaded program (second call)"]),
    ("export_static_cache", "WrongSlotLM", False, ["cannot carry its cache across calls", "decode step 1",
                                                   "wrote cache slot(s) [7] instead of [8]"]),
    ("export_static_cache", "BakedPositionLM", False, ["cannot carry its cache across calls", "decode step 1",
                                                       "wrote cache slot(s) [0] instead of [8]"]),
    ("export_static_cache", "StaleCacheLM", False, ["cannot carry its cache across calls", "decode step 1",
                                                    "cache buffers are unchanged"]),
    ("export_static_cache", "DetachedCacheLM", False, ["cannot carry its cache across calls", "prefill",
                                                       "cache buffers are unchanged"]),
    ("export_static_cache", "PrefillCounterLM", False, ["prompt 2: prefill", "out of bounds"]),
    ("export_static_cache", "ExportedDecodeNumericsLM", False, ["decode step 1 of the program vs eager generate",
                                                                "by 0.001"]),
    ("export_static_cache", "LockedLM", False, ["torch.export.export(strict=True)", "context manager"]),
    ("export_generate", "WrongSlotLM", False, ["tokens from the exported parts differ", "new token 1"]),
    ("export_generate", "StaleCacheLM", False, ["tokens from the exported parts differ"]),
    ("export_generate", "BakedPositionLM", False, ["out of bounds"]),
    ("export_generate", "ExportedDecodeNumericsLM", False, ["decode step 1 of the exported parts", "by 0.001"]),
    ("export_onnx", "ExportedNumericsLM", False, ["onnx runtime logits", "differ from eager by 0.001",
                                                  "the torch.export program onnx was translated from differs"]),
    ("export_onnx", "DataDependentLM", False, ["export", "data-dependent"]),
    ("onnx_generate", "ExportedDecodeNumericsLM", False, ["decode step 1", "logits differ by 0.001"]),
    ("onnx_generate", "WrongSlotLM", False, ["new token 1", "differ from eager generate"]),
    ("onnx_generate", "StaleCacheLM", False, ["new token 3", "differ from eager generate"]),
]

# The correct model, once per check, with media where the check is about media.
CORRECT = [("build", True), ("compile_prefill", False), ("compile_dynamic", False), ("compile_decode", False),
           ("static_cache", False), ("legacy_cache", False), ("export_forward", False), ("export_dynamic", False),
           ("export_forward_strict", False),
           ("export_static_cache", False), ("export_static_cache", True), ("export_generate", False),
           ("export_onnx", False), ("onnx_generate", False)]


def installed(check_id: str) -> None:
    """Skip, naming the extra, where an optional column's packages are missing (its cells are then not run)."""
    why = unavailable(check_id)
    if why:
        pytest.skip(f"{check_id} {why}")


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads cost more than they give, and the machine is shared
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("check_id,media", CORRECT, ids=[f"{c}{'+media' if m else ''}" for c, m in CORRECT])
def test_the_correct_model_passes(check_id, media):
    installed(check_id)
    outcome = run_check(check_id, planted.case_for(planted.TinyLM, media=media))
    assert outcome.verdict == "pass", outcome.reason
    assert planted.judged_as_declared(check_id, outcome.metrics), outcome.metrics


@pytest.mark.parametrize("check_id,model,media,substance", PLANTED, ids=[f"{c}-{m}" for c, m, _, _ in PLANTED])
def test_a_planted_bug_turns_the_cell_red_naming_the_bug(check_id, model, media, substance):
    installed(check_id)
    outcome = run_check(check_id, planted.case_for(getattr(planted, model), media=media))
    assert outcome.verdict == "fail", f"{model} passed {check_id}: {outcome.metrics}"
    reason = outcome.reason.lower()
    missing = [s for s in substance if s.lower() not in reason]
    assert not missing, f"reason {outcome.reason!r} does not name {missing}"


def test_every_check_has_a_planted_family():
    """Each registered check (but `executorch`, optional and lowered from export_generate's parts) has planted bugs;
    the `exporter_*` columns have theirs in `test_checks_exporters.py`, the quantized `exporter_*` rows theirs in
    `test_checks_quantized.py` (a planted model through every row, planted quantizer bugs one row per backend and
    part: the rows of one backend and part run one path), the `aoti_*` columns theirs (a C++ build each) in
    `test_checks_aoti.py` and `test_checks_aoti_generate.py`."""
    from conformance.meta.test_checks_exporters import PLANTED as EXPORTERS
    from conformance.meta.test_checks_quantized import QUANTIZED

    families = {check_id for check_id, *_ in PLANTED + EXPORTERS} | {"aoti_forward", "aoti_generate"} | set(QUANTIZED)
    assert set(load_all()) - {"executorch"} <= families
