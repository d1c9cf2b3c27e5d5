"""The line between a model's failure and the suite's: a planted bug in the suite's own code is a harness error.

A helper whose code is the suite's (compiled under a file name inside the
package, so its frames are the suite's as a real helper's would be) raises
an AttributeError: the cell is `error` with a `harness_error` fingerprint at
that site, the expectations cannot list it as anything else, and `findings`
never presents it as an upstream root cause. The same exception raised in
transformers' code is the model's failure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import conformance
from conformance.checks.common import registry
from conformance.checks.common.outcome import ContractViolation, run_check
from conformance.fingerprints import Fingerprint
from conformance.gate.expectations import Expectation, ExpectationsError, parse
from conformance.gate.ratchet import judge
from conformance.reasons import raised_in_suite, suite_site
from conformance.report import findings

SUITE_FILE = Path(conformance.__file__).parent / "checks" / "common" / "planted_helper.py"  # never on disk
MODEL_FILE = "/site-packages/transformers/models/planted/modeling_planted.py"
HELPER = '''
def cache_layers(cache):
    return cache.keys  # the bug: the object has no `keys`
'''


def _helper(filename: str, source: str = HELPER, name: str = "cache_layers"):
    """`name` of `source` compiled under `filename` (its frames then belong to that file's owner)."""
    scope: dict = {"__name__": "conformance.checks.common.planted_helper"}
    exec(compile(source, str(filename), "exec"), scope)
    return scope[name]


class _Case:
    seed = 0


@pytest.fixture
def planted_check():
    """Register `planted_harness_bug` (calls the suite helper) and `planted_model_bug` (the same, in
    transformers' code) for one test."""
    suite_helper, model_helper = _helper(SUITE_FILE), _helper(MODEL_FILE)

    def suite_bug(case):
        return {"layers": suite_helper(object())}

    def model_bug(case):
        return {"layers": model_helper(object())}

    def wrapped_suite_bug(case):
        try:
            suite_helper(object())
        except AttributeError as exc:
            raise ContractViolation("export of part 'decoder' failed") from exc

    def deliberate(case):
        raise ContractViolation("the cache returns wrong values")

    added = {"planted_harness_bug": suite_bug, "planted_model_bug": model_bug,
             "planted_wrapped_bug": wrapped_suite_bug, "planted_contract": deliberate}
    registry.load_all()
    for i, (name, fn) in enumerate(added.items()):
        registry.CHECKS[name] = registry.Check(name, fn, 900 + i)
    yield
    for name in added:
        registry.CHECKS.pop(name, None)


def test_an_exception_raised_in_the_suites_own_code_is_a_harness_error(planted_check):
    outcome = run_check("planted_harness_bug", _Case())
    assert outcome.verdict == "error"
    assert outcome.fingerprint.kind == "harness_error"
    assert outcome.fingerprint.where == "conformance.checks.common.planted_helper:cache_layers"
    assert outcome.fingerprint.error == "AttributeError"
    assert outcome.reason.startswith("harness error: the suite's own code raised")
    assert "conformance/checks/common/planted_helper.py:3" in outcome.reason


def test_a_violation_that_wraps_a_suite_exception_is_a_harness_error_too(planted_check):
    outcome = run_check("planted_wrapped_bug", _Case())
    assert outcome.verdict == "error" and outcome.fingerprint.kind == "harness_error"


def test_the_same_exception_raised_in_transformers_is_the_models_failure(planted_check):
    outcome = run_check("planted_model_bug", _Case())
    assert outcome.verdict == "fail"
    assert outcome.fingerprint.kind == "exception"
    assert outcome.fingerprint.where.startswith("transformers.models.planted")


def test_a_violation_the_check_raises_on_purpose_is_a_finding(planted_check):
    outcome = run_check("planted_contract", _Case())
    assert outcome.verdict == "fail" and outcome.fingerprint.kind == "contract"


def test_the_harness_error_stays_an_error_even_when_listed_as_the_models_failure(planted_check):
    outcome = run_check("planted_harness_bug", _Case())
    as_model = Expectation("Planted", "planted_harness_bug", "fail", "listed as a model failure",
                           fingerprint=Fingerprint("exception", where=outcome.fingerprint.where, error="AttributeError"))
    assert judge(outcome.verdict, as_model, outcome.fingerprint).verdict == "error"
    as_gap = Expectation("Planted", "planted_harness_bug", "error", "a known gap of the suite",
                         fingerprint=outcome.fingerprint)
    assert judge(outcome.verdict, as_gap, outcome.fingerprint).verdict == "xfail"


def test_an_expectations_file_that_lists_a_suite_site_as_a_model_failure_is_refused(tmp_path):
    text = '''
[[cell]]
model = "LlavaForConditionalGeneration"
check = "onnx_generate"
verdict = "fail"
reason = "AttributeError: 'LinearAttentionLayer' object has no attribute 'keys'"
[cell.fingerprint]
kind = "exception"
where = "conformance.checks.common.generation:DecoderPart.forward"
error = "AttributeError"
'''
    with pytest.raises(ExpectationsError) as raised:
        parse(text, tmp_path / "5.24.toml")
    message = str(raised.value)
    assert "\n" not in message
    assert "LlavaForConditionalGeneration / onnx_generate" in message and "harness_error" in message
    fine = text.replace('verdict = "fail"', 'verdict = "error"').replace('kind = "exception"', 'kind = "harness_error"')
    assert parse(fine, tmp_path / "5.24.toml").cells


def test_findings_never_lists_a_suite_site_as_an_upstream_root_cause():
    cell = {"verdict": "xfail", "expected": "fail", "observed": "fail", "reason": "AttributeError",
            "seconds": 1.0, "metrics": {},
            "fingerprint": {"kind": "exception", "where": "conformance.checks.common.generation:DecoderPart.forward",
                            "error": "AttributeError"}}
    envelope = {"schema": "vlm-conformance/1", "environment": {"transformers": "5.24.0", "backend": "eager"},
                "checks": ["onnx_generate"], "check_info": {}, "summary": {},
                "models": {"AForConditionalGeneration": {"cells": {"onnx_generate": cell}}}}
    groups = findings.group_failures([envelope])
    assert groups and not any(g.upstream for g in groups)


def test_raised_in_suite_follows_explicit_causes_to_the_root():
    helper = _helper(MODEL_FILE)
    try:
        try:
            helper(object())
        except AttributeError as exc:
            raise RuntimeError("wrapped by the suite") from exc
    except RuntimeError as outer:
        assert not raised_in_suite(outer)  # the root was raised in transformers


def test_one_walk_of_an_exception_chain_and_its_innermost():
    """`reasons.exception_chain` / `innermost`: the one home of "the exception a chain started from"."""
    from conformance.reasons import exception_chain, innermost

    root, middle, outer, handled, inner = (ValueError(n) for n in ("root", "middle", "outer", "handled", "inner"))
    middle.__cause__, outer.__cause__ = root, middle
    assert exception_chain(outer) == [outer, middle, root] and innermost(outer) is root
    assert innermost(root) is root and innermost(root, at_repeat=True) is root
    root.__context__ = handled  # implicit context: followed only when asked
    assert exception_chain(outer) == [outer, middle, root]
    assert exception_chain(outer, context=True) == [outer, middle, root, handled]
    middle.inner_exception = inner  # a wrapper's inner exception comes first
    assert exception_chain(outer, context=True, inner=True) == [outer, middle, inner]
    root.__cause__ = outer  # causes that loop back end the walk before the repeat
    assert exception_chain(outer) == [outer, middle, root]
    assert innermost(outer) is root and innermost(outer, at_repeat=True) is outer


LOOKUP = '''
def generation_config_of(model):
    return model.generation_config  # the bug: a module without generate() has none
'''


def test_a_failed_attribute_lookup_is_the_failure_of_the_code_that_looked_it_up():
    """torch's `Module.__getattr__` raises the AttributeError of a lookup the suite made (PI0's exporter
    generation cells were published as an upstream exception at that frame): the lookup's caller is the raising
    code, so the suite's lookup is a harness error, and the same lookup in transformers' code the model's."""
    import torch

    def raised(filename):
        try:
            _helper(filename, LOOKUP, "generation_config_of")(torch.nn.Linear(2, 2))
        except AttributeError as exc:
            return exc
        raise AssertionError("the planted lookup did not raise")

    in_suite_code = raised(SUITE_FILE)
    assert raised_in_suite(in_suite_code)
    assert suite_site(in_suite_code) == "conformance.checks.common.planted_helper:generation_config_of"
    assert not raised_in_suite(raised(MODEL_FILE))


def test_a_generator_that_scores_no_vocabulary_is_a_gap_of_the_token_decoding_checks():
    """A continuous-frame text-to-speech generate scores end-of-speech per row, shape (batch,): the checks that
    force or compare tokens cannot set themselves up (HarnessGap: `error`, never the model's failure), while
    token and per-codebook scores pass through."""
    import torch

    from conformance.checks.common.generation import require_token_scores
    from conformance.checks.common.outcome import HarnessGap

    assert len(require_token_scores([torch.zeros(2, 7), torch.zeros(2, 7)])) == 2
    assert len(require_token_scores((torch.zeros(2, 4, 7),))) == 1  # one vocabulary per codebook
    with pytest.raises(HarnessGap, match=r"shape \(2,\), with no vocabulary axis"):
        require_token_scores([torch.zeros(2, 7), torch.zeros(2)])


def test_a_speech_start_sample_ends_every_row_at_the_first_audio_position():
    """The `speech_start` strategy (fixtures/models/pocket_tts.toml): left-padded text whose every row ends with
    `audio_bos_token_id`, as continuous-latent TTS `generate` requires."""
    from types import SimpleNamespace

    import torch
    from transformers import PretrainedConfig

    from conformance.cases.strategies import speech_start

    config = PretrainedConfig(vocab_size=64, audio_bos_token_id=60, pad_token_id=3)
    ctx = SimpleNamespace(config=config, generator=lambda: torch.Generator().manual_seed(0))
    sample = speech_start.speech_start(ctx)
    ids, mask = sample.inputs["input_ids"], sample.inputs["attention_mask"]
    assert (ids[:, -1] == 60).all() and (mask[:, -1] == 1).all()
    assert (ids[0, : int((mask[0] == 0).sum())] == 3).all()  # row 0 left-padded
    assert ids.shape[0] == 2
