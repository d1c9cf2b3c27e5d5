"""compile_dynamic and export_dynamic on synthetic models whose answer is known, and the variants they call.

A model that branches on its prompt length specialises that dimension: both
checks fail and name the dimension, the guard and the line. A model that
does not passes both. A model that branches on a length threshold keeps the
dimension symbolic but guards a range: the compiled model recompiles for the
longer prompt, and the exported program refuses it.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch

from conformance.cases.samples import Sample
from conformance.cases.tiny import TinyModel
from conformance.cases.variants import LONGER, doubled_batch, longer, make_variants, shorter
from conformance.checks.common.outcome import run_check
from conformance.checks.common.registry import load_all
from conformance.checks.common.shapes import SHAPES_LOGGER, ShapeLog, dim_name, dynamic_inputs, varying_dims
from conformance.meta.planted import PlantedCase

pytestmark = pytest.mark.meta

load_all()
TRACED = 8  # the synthetic sample's prompt length
VOCAB = 16
PAD, PLACEHOLDER = 0, 15


class _Config(SimpleNamespace):
    def get_text_config(self, *args, **kwargs):
        return self

    def to_dict(self):
        return {"pad_token_id": self.pad_token_id, "image_token_id": self.image_token_id}


CONFIG = _Config(vocab_size=VOCAB, pad_token_id=PAD, image_token_id=PLACEHOLDER)


class Clean(torch.nn.Module):
    """Mixes the sequence (a cumulative sum) and takes any prompt length and batch."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, 8)
        self.head = torch.nn.Linear(8, VOCAB)

    def hidden(self, input_ids, attention_mask):
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return hidden + 0.1 * hidden.cumsum(dim=1)

    def forward(self, input_ids, attention_mask=None):
        return {"logits": self.head(self.hidden(input_ids, attention_mask))}


class BranchesOnLength(Clean):
    def forward(self, input_ids, attention_mask=None):
        hidden = self.hidden(input_ids, attention_mask)
        if input_ids.shape[1] == TRACED:  # specialises the prompt length
            hidden = hidden * 2
        return {"logits": self.head(hidden)}


class BranchesOnLongPrompts(Clean):
    def forward(self, input_ids, attention_mask=None):
        hidden = self.hidden(input_ids, attention_mask)
        if input_ids.shape[1] > TRACED + 2:  # a range guard: the longer prompt takes the other branch
            hidden = hidden * 2
        return {"logits": self.head(hidden)}


BRANCH_LINE = BranchesOnLongPrompts.forward.__code__.co_firstlineno + 2


def _sample() -> Sample:
    ids = torch.tensor([[PAD, PAD, PAD, 3, 4, PLACEHOLDER, 5, 6], [7, 8, 9, 10, PLACEHOLDER, 11, 12, 13]])
    return Sample(inputs={"input_ids": ids, "attention_mask": (ids != PAD).long()}, strategy="synthetic")


def case_of(factory) -> PlantedCase:
    tiny = TinyModel(info=None, config=CONFIG, source="synthetic")
    return PlantedCase(info=SimpleNamespace(name="Synthetic"), tiny=tiny, sample=_sample(), factory=factory)


# ---- the checks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("check_id", ["compile_dynamic", "export_dynamic"])
def test_a_model_that_keeps_the_length_symbolic_passes(check_id):
    case = case_of(Clean)
    outcome = run_check(check_id, case)
    assert outcome.verdict == "pass", outcome.reason
    assert outcome.metrics["max_abs_diff"] <= 1e-4
    assert not hasattr(case.sample.inputs["input_ids"], "_dynamo_dynamic_indices")  # the sample stays unmarked


def test_compile_dynamic_reports_one_graph_for_three_lengths():
    outcome = run_check("compile_dynamic", case_of(Clean))
    assert outcome.metrics["graphs"] == 1 and outcome.metrics["recompiles"] == 0
    assert outcome.metrics["lengths"] == [TRACED, TRACED - 2, TRACED + LONGER]
    assert outcome.metrics["marked"] == {"input_ids": [1], "attention_mask": [1]}


def test_export_dynamic_serves_every_variant_and_a_dynamic_batch():
    outcome = run_check("export_dynamic", case_of(Clean))
    variants = outcome.metrics["variants"]
    assert [variants[n] for n in ("traced", "shorter", "longer", "batch")] == ["pass"] * 4
    assert outcome.metrics["dynamic"]["input_ids"] == [0, 1] and outcome.metrics["dynamic_batch"] is True
    assert variants["images"] == "the sample has no media inputs"


@pytest.mark.parametrize("check_id", ["compile_dynamic", "export_dynamic"])
def test_a_branch_on_the_length_fails_naming_the_dimension_the_guard_and_the_line(check_id):
    outcome = run_check(check_id, case_of(BranchesOnLength))
    assert outcome.verdict == "fail"
    assert "input_ids dim 1 specialised to 8 by Eq(" in outcome.reason, outcome.reason
    assert "test_checks_dynamic.py:" in outcome.reason and "in forward" in outcome.reason, outcome.reason
    assert "\n" not in outcome.reason


def test_compile_dynamic_names_the_specialisation_before_any_variant():
    outcome = run_check("compile_dynamic", case_of(BranchesOnLength))
    assert outcome.reason.startswith("prompt length cannot be dynamic: input_ids dim 1"), outcome.reason


def test_export_dynamic_says_which_prompt_the_static_program_cannot_take():
    outcome = run_check("export_dynamic", case_of(BranchesOnLength))
    assert outcome.reason.startswith("fewer text tokens per prompt: input_ids dim 1 specialised"), outcome.reason
    assert outcome.metrics["variants"]["traced"] == "pass"


def test_a_range_guard_recompiles_for_the_longer_prompt_and_the_program_refuses_it():
    compiled = run_check("compile_dynamic", case_of(BranchesOnLongPrompts))
    assert compiled.verdict == "fail"
    assert compiled.reason.startswith(f"recompiled for the prompt with {LONGER} text tokens more per prompt: "
                                      "failed guard 2 <= input_ids.size()[1] <= 10, set by "), compiled.reason
    assert compiled.reason.endswith(f"(at test_checks_dynamic.py:{BRANCH_LINE} in forward)"), compiled.reason
    assert compiled.metrics["recompiles"] == 1
    exported = run_check("export_dynamic", case_of(BranchesOnLongPrompts))
    assert exported.verdict == "fail"
    assert exported.reason.startswith(f"{LONGER} text tokens more per prompt: loaded program: "), exported.reason
    assert exported.reason.endswith(f"(at test_checks_dynamic.py:{BRANCH_LINE} in forward)"), exported.reason
    assert exported.metrics["variants"]["shorter"] == "pass"


@pytest.mark.parametrize("check_id", ["compile_dynamic", "export_dynamic"])
def test_a_specialised_length_has_a_fingerprint_naming_the_guard_and_its_site(check_id):
    site = "conformance.meta.test_checks_dynamic:BranchesOnLength.forward"
    outcome = run_check(check_id, case_of(BranchesOnLength))
    assert outcome.fingerprint.to_data() == {"kind": "specialisation", "where": site, "what": "input_ids dim 1",
                                             "guard": f"Eq(s#, #) @ {site}"}
    # No symbol or line number in it: the same failure traced again has the same fingerprint.
    assert run_check(check_id, case_of(BranchesOnLength)).fingerprint == outcome.fingerprint


def test_a_range_guard_is_a_recompile_and_a_refused_call_at_the_line_that_set_the_bound():
    site = "conformance.meta.test_checks_dynamic:BranchesOnLongPrompts.forward"
    compiled = run_check("compile_dynamic", case_of(BranchesOnLongPrompts)).fingerprint
    assert (compiled.kind, compiled.where, compiled.recompiles) == ("recompile", site, 1)
    assert compiled.guard == f"s# > # @ {site}"
    exported = run_check("export_dynamic", case_of(BranchesOnLongPrompts)).fingerprint
    assert (exported.kind, exported.where, exported.what) == ("export_error", site, "loaded program")


def test_the_dynamic_columns_declare_what_they_compare_and_are_opt_in():
    from conformance.checks.common.registry import get

    assert get("compile_dynamic").compares == ("max_abs_diff",) and get("compile_dynamic").tolerance is None
    assert get("export_dynamic").compares == ("max_abs_diff",) and get("export_dynamic").tolerance == "export"
    assert get("compile_dynamic").opt_in == get("export_dynamic").opt_in == "dynamic"


# ---- the variants ---------------------------------------------------------------------------------


def _rich_sample() -> Sample:
    """Every kind of sequence-aligned input next to a placeholder: types, positions (3, B, L), a 4-D mask."""
    base = _sample().inputs
    ids, mask = base["input_ids"], base["attention_mask"]
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    inputs = {**base, "mm_token_type_ids": (ids == PLACEHOLDER).long(),
              "position_ids": positions.unsqueeze(0).repeat(3, 1, 1),
              "cross_attention_mask": mask[:, :, None, None].repeat(1, 1, 1, 2),
              "pixel_values": torch.randn(2, 3, 4, 4)}
    return Sample(inputs=inputs, strategy="synthetic", media_keys=("pixel_values",))


def test_longer_inserts_text_after_the_last_all_text_column_in_every_aligned_input():
    sample = _rich_sample()
    grown = longer(sample, CONFIG, {}).inputs
    assert grown["input_ids"].shape == (2, TRACED + LONGER)
    assert grown["position_ids"].shape == (3, 2, TRACED + LONGER)
    assert grown["cross_attention_mask"].shape == (2, TRACED + LONGER, 1, 2)
    assert torch.equal(grown["pixel_values"], sample.inputs["pixel_values"])
    assert (grown["input_ids"] == PLACEHOLDER).sum() == 2  # placeholders untouched
    assert grown["attention_mask"][:, -LONGER:].all() and not grown["mm_token_type_ids"][:, -LONGER:].any()
    assert grown["position_ids"][0, 1].tolist() == list(range(TRACED + LONGER))  # positions keep counting
    new = grown["input_ids"][:, -LONGER:]
    assert ((new >= 3) & (new < VOCAB) & (new != PLACEHOLDER)).all()


def test_shorter_removes_text_and_renumbers_positions():
    cut = shorter(_rich_sample(), CONFIG, {}).inputs
    assert cut["input_ids"].shape == (2, TRACED - 2) and cut["cross_attention_mask"].shape[1] == TRACED - 2
    assert (cut["input_ids"] == PLACEHOLDER).sum() == 2
    assert cut["position_ids"][0, 1].tolist() == list(range(TRACED - 2))


def test_a_prompt_without_ordinary_text_has_no_length_variants():
    ids = torch.full((2, 4), PLACEHOLDER)
    sample = Sample(inputs={"input_ids": ids, "attention_mask": torch.ones_like(ids)}, strategy="synthetic")
    variants = make_variants(TinyModel(info=None, config=CONFIG, source="synthetic"), sample, Clean().eval())
    assert variants.lengths() == []
    assert "no column of input_ids holds ordinary text" in variants.unavailable["longer"]


def test_doubled_batch_repeats_prompts_and_images_alike():
    doubled = doubled_batch(_rich_sample()).inputs
    assert doubled["input_ids"].shape == (4, TRACED) and doubled["position_ids"].shape == (3, 4, TRACED)
    assert torch.equal(doubled["pixel_values"][2:], doubled["pixel_values"][:2])


def test_a_batch_the_model_does_not_repeat_is_refused():
    class MixesTheBatch(Clean):
        def forward(self, input_ids, attention_mask=None):
            hidden = self.hidden(input_ids, attention_mask)
            return {"logits": self.head(hidden + hidden.sum(dim=0, keepdim=True))}

    variants = make_variants(TinyModel(info=None, config=CONFIG, source="synthetic"), _sample(), MixesTheBatch())
    assert "does not repeat the prompts" in variants.unavailable["batch"]


def test_strategies_make_more_and_wider_images_from_the_recipe():
    from conformance.cases.strategies import get_strategy
    from conformance.meta.test_samples import _ctx, _placeholders

    ctx = _ctx({"input_ids", "attention_mask", "pixel_values"})
    base = get_strategy("pixels")(ctx)
    ctx.recipe = {"images_per_prompt": 2}
    more = get_strategy("pixels")(ctx)
    assert more.inputs["pixel_values"].shape[0] == 2 * base.inputs["pixel_values"].shape[0]
    assert _placeholders(more) == [2 * n for n in _placeholders(base)]
    ctx.recipe = {"image_scale": (1, 2)}
    wide = get_strategy("pixels")(ctx)
    assert wide.inputs["pixel_values"].shape[-1] == 2 * base.inputs["pixel_values"].shape[-1]


# ---- shapes plumbing ------------------------------------------------------------------------------


def test_varying_dims_and_structure_changes():
    base = {"input_ids": torch.zeros(2, 8), "pixel_values": torch.zeros(2, 3, 4, 4), "n": 3}
    assert varying_dims(base, [{"input_ids": torch.zeros(2, 10), "pixel_values": torch.zeros(4, 3, 4, 4)}]) == {
        "input_ids": {1}, "pixel_values": {0}}
    with pytest.raises(ValueError, match="input_ids"):
        varying_dims(base, [{"input_ids": torch.zeros(2, 8, 1), "pixel_values": torch.zeros(2, 3, 4, 4)}])


def test_dim_names_and_the_log_leaves_the_logger_as_it_was():
    assert dim_name("L['input_ids'].size()[1]") == "input_ids dim 1"
    assert dim_name("L['kwargs']['pixel_values'][0].size()[0]") == "pixel_values[0] dim 0"
    logger = logging.getLogger(SHAPES_LOGGER)
    before = (logger.level, logger.propagate, list(logger.handlers))
    with ShapeLog():
        assert logger.level == logging.INFO
    assert (logger.level, logger.propagate, list(logger.handlers)) == before


def test_dynamic_inputs_names_the_inputs_with_a_symbolic_dim():
    ids = torch.zeros(2, TRACED, dtype=torch.long)
    static = torch.export.export(Clean(), (ids, torch.ones_like(ids)))
    dynamic = torch.export.export(Clean(), (ids, torch.ones_like(ids)),
                                  dynamic_shapes=({1: torch.export.Dim.AUTO}, {1: torch.export.Dim.AUTO}))
    assert dynamic_inputs(static) == [] and dynamic_inputs(dynamic) == ["input_ids", "attention_mask"]
