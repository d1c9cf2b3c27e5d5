"""The ONNX checks on small synthetic modules whose answer is known (no tiny VLM is built).

Most tests need the ``[onnx]`` extra (onnx, onnxscript, onnxruntime);
without it they are skipped with the install command (a meta test of the
harness may skip; a matrix cell never says "does not apply" for that:
`test_not_run.py`).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from conformance import tolerances
from conformance.cases.samples import Sample
from conformance.cases.variants import Variants
from conformance.checks import export_onnx, onnx_generate
from conformance.checks.common import onnx as _onnx
from conformance.checks.common import registry
from conformance.checks.common.outcome import ContractViolation, run_check
from conformance.meta.planted import Exportable, FactoryCase

pytestmark = pytest.mark.meta

needs_onnx = pytest.mark.skipif(bool(registry.unavailable("export_onnx")),
                                reason=f"export_onnx {registry.unavailable('export_onnx')}")
EXPORTERS = ["torch"] + (["transformers"] if _onnx.has_transformers_exporter() else [])


class UnsupportedOp(Exportable):
    """`kthvalue` has no ONNX lowering in torch.onnx's function library."""

    def forward(self, input_ids, attention_mask=None):
        hidden = self.embed(input_ids)
        return {"logits": self.head(hidden - torch.kthvalue(hidden, 2, dim=-1, keepdim=True).values)}


class Raises(Exportable):
    def forward(self, input_ids, attention_mask=None):
        raise NotImplementedError("this model cannot run")


class LargeOffsetLayerNorm(torch.nn.Module):
    """A LayerNorm over hidden states with a large common offset (mean 1e4, spread ~1).

    PyTorch's layer norm keeps full float32 precision here; ONNX Runtime's
    LayerNormalization loses about 1e-3 of it (the variance of values far from
    zero), so the ONNX logits differ from eager by more than the export tolerance.
    """

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(16, 256)
        self.norm = torch.nn.LayerNorm(256)
        self.head = torch.nn.Linear(256, 16)

    def forward(self, input_ids, attention_mask=None):
        return {"logits": self.head(self.norm(self.embed(input_ids) + 1e4))}


class PaddedAttention(torch.nn.Module):
    """Self-attention whose mask hides the padding keys: a left-padding query sees no key at all.

    On such a fully masked row eager SDPA and ONNX Runtime disagree (NaN/zeros
    against an average): the check compares only the positions the attention
    mask keeps.
    """

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(16, 8)
        self.head = torch.nn.Linear(8, 16)

    def forward(self, input_ids, attention_mask=None):
        hidden = self.embed(input_ids).unsqueeze(1)
        length = input_ids.shape[1]
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        keys = attention_mask.bool()[:, None, None, :]
        mask = causal[None, None] & keys & attention_mask.bool()[:, None, :, None]
        out = torch.nn.functional.scaled_dot_product_attention(hidden, hidden, hidden, attn_mask=mask)
        return {"logits": self.head(out.squeeze(1))}


def case_of(factory, inputs=None, config=None) -> FactoryCase:
    inputs = inputs or {"input_ids": torch.tensor([[0, 0, 4, 5], [5, 6, 7, 8]]),
                        "attention_mask": torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])}
    return FactoryCase(info=None, tiny=SimpleNamespace(config=config), sample=Sample(inputs=inputs,
                         strategy="synthetic"), factory=factory)


@pytest.fixture(params=EXPORTERS)
def exporter(request, monkeypatch):
    monkeypatch.setenv(_onnx.EXPORTER_ENV, request.param)
    return _onnx.TORCH_EXPORTER if request.param == "torch" else _onnx.TRANSFORMERS_EXPORTER


@pytest.mark.parametrize("check_id", ["export_onnx", "onnx_generate"])
def test_both_checks_declare_the_onnx_extra(check_id):
    spec = registry.get(check_id)
    assert spec.requires == ("onnx", "onnxscript", "onnxruntime") and spec.extra == "onnx"
    assert registry.describe([check_id])[check_id]["extra"] == "onnx"
    assert 90 < spec.column < 100  # after export_generate, before executorch (docs/onnx.md)


@needs_onnx
def test_exportable_module_passes(exporter):
    outcome = run_check("export_onnx", case_of(Exportable))
    assert outcome.verdict == "pass", outcome.reason
    metrics = outcome.metrics
    assert metrics["exporter"] == exporter
    assert metrics["max_abs_diff"] <= 1e-4
    assert metrics["compared_positions"] == 6  # the two left-padding positions are not compared
    assert metrics["graph_nodes"] > 0 and metrics["model_bytes"] > 0 and metrics["export_seconds"] > 0
    assert metrics["dynamic_inputs"] == []  # exported at the sample's shapes: a static graph, and the metric says so


@needs_onnx
def test_an_operator_onnx_cannot_lower_fails_with_the_exporters_reason(exporter):
    outcome = run_check("export_onnx", case_of(UnsupportedOp))
    assert outcome.verdict == "fail"
    assert outcome.reason.startswith(f"export ({exporter}): ")
    assert "kthvalue" in outcome.reason and "\n" not in outcome.reason


@needs_onnx
def test_a_model_that_raises_fails_with_its_error(exporter):
    outcome = run_check("export_onnx", case_of(Raises))
    assert outcome.verdict == "fail"
    assert "NotImplementedError: this model cannot run" in outcome.reason


@needs_onnx
def test_an_onnx_runtime_numerical_mismatch_fails_with_its_size(exporter):
    outcome = run_check("export_onnx", case_of(LargeOffsetLayerNorm))
    assert outcome.verdict == "fail", outcome.metrics
    assert outcome.reason.startswith("ONNX Runtime logits: logits differ from eager by ")
    assert outcome.metrics["max_abs_diff"] > 1e-4
    # ...and says it is ONNX's (translation + runtime), not the torch.export program's.
    assert outcome.metrics["program_diff"] <= 1e-5 and outcome.metrics["onnx_vs_program_diff"] > 1e-4
    assert "the torch.export program ONNX was translated from differs from eager by" in outcome.reason


class TracedDifferently(Exportable):
    """A model whose traced graph is not its eager computation (a branch taken only while exporting)."""

    def forward(self, input_ids, attention_mask=None):
        logits = super().forward(input_ids, attention_mask)["logits"]
        if torch.compiler.is_exporting():
            logits = logits + 1e-3
        return {"logits": logits}


@needs_onnx
def test_a_graph_that_differs_from_eager_before_onnx_is_told_apart_from_a_runtime_mismatch(exporter):
    outcome = run_check("export_onnx", case_of(TracedDifferently))
    assert outcome.verdict == "fail"
    assert abs(outcome.metrics["program_diff"] - 1e-3) < 1e-5
    assert outcome.metrics["onnx_vs_program_diff"] <= 1e-5


@needs_onnx
def test_padding_positions_are_not_compared(monkeypatch):
    monkeypatch.setenv(_onnx.EXPORTER_ENV, "torch")
    seen = {}
    compare = export_onnx.compare_logits

    def spy(actual, expected, keep, tol, what, metrics):
        seen["all"] = float((actual - expected).abs().nan_to_num(1.0).max())
        return compare(actual, expected, keep, tol, what, metrics)

    monkeypatch.setattr(export_onnx, "compare_logits", spy)
    outcome = run_check("export_onnx", case_of(PaddedAttention))
    assert seen["all"] > 1e-4  # the fully masked padding rows do differ...
    assert outcome.verdict == "pass", outcome.reason  # ...and are not compared
    assert outcome.metrics["compared_positions"] == 6


def test_compare_logits_gates_on_kept_positions_only():
    expected = torch.zeros(2, 3, 4)
    keep = torch.tensor([[False, True, True], [True, True, True]])
    padded = expected.clone()
    padded[0, 0] += 1.0
    metrics: dict = {}
    export_tol = tolerances.tolerance("float32", "export")
    assert export_onnx.compare_logits(padded, expected, keep, export_tol, "x", metrics).max_abs_diff == 0.0
    assert metrics["compared_positions"] == 5
    kept = expected.clone()
    kept[0, 1, 2] += 2e-4
    with pytest.raises(ContractViolation, match="differ from eager by 0.0002 > 0.0001"):
        export_onnx.compare_logits(kept, expected, keep, export_tol, "x", {})
    with pytest.raises(ContractViolation, match="logits shape"):
        export_onnx.compare_logits(expected[:, :2], expected, keep, export_tol, "x", {})


def test_non_padding_is_the_attention_mask_when_the_logits_align_with_it():
    mask = torch.tensor([[0, 1, 1]])
    assert export_onnx.non_padding(torch.zeros(1, 3, 5), {"attention_mask": mask}).tolist() == [[False, True, True]]
    assert export_onnx.non_padding(torch.zeros(1, 7, 5), {"attention_mask": mask}) is None
    assert export_onnx.non_padding(torch.zeros(1, 3, 5), {}) is None
    # An encoder-decoder's logits are over the decoder positions: the encoder's mask does not say which.
    decoder = {"attention_mask": mask, "decoder_input_ids": torch.zeros(1, 3, dtype=torch.long)}
    assert export_onnx.non_padding(torch.zeros(1, 3, 5), decoder) is None
    decoder["decoder_attention_mask"] = torch.tensor([[1, 1, 0]])
    assert export_onnx.non_padding(torch.zeros(1, 3, 5), decoder).tolist() == [[True, True, False]]


def test_a_dropped_use_cache_flag_is_named_with_the_eager_use_cache_true_difference():
    class CacheDependent(torch.nn.Module):
        def forward(self, input_ids, use_cache=False):
            return {"logits": input_ids.float().unsqueeze(-1) + (1.0 if use_cache else 0.0)}

    ids = torch.tensor([[1, 2]])
    metrics = {"cache_outputs": 4}
    onnx_like = ids.float().unsqueeze(-1) + 1.0  # what a graph traced with the cache on returns
    text = export_onnx.ignored_use_cache(CacheDependent(), {"input_ids": ids}, {}, onnx_like, None, metrics)
    assert "returns 4 cache tensors although use_cache=False was passed" in text
    assert metrics["use_cache_true_diff"] == 0.0


def test_functional_step_returns_the_updated_cache_and_leaves_its_inputs_alone():
    lm = _tiny_lm()
    step = onnx_generate.FunctionalStep(lm, max_len=8)
    prefill = onnx_generate.DecoderPart(lm, max_len=8)
    embeds = lm.get_input_embeddings()(torch.tensor([[3, 14, 15]]))
    with torch.no_grad():
        _, *state = prefill(embeds)
        before = [t.clone() for t in state]
        logits, *after = step(embeds[:, -1:], state)
    assert all(torch.equal(a, b) for a, b in zip(state, before))  # inputs not mutated
    assert len(after) == len(state) and int(after[2]) == int(state[2]) + 1  # length of layer 0 moved by one
    assert logits.shape == (1, lm.config.vocab_size)


def _tiny_lm():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=64, max_position_embeddings=64)
    return LlamaForCausalLM(config).eval()


def _lm_case() -> FactoryCase:
    inputs = {"input_ids": torch.tensor([[0, 0, 3, 14, 15], [9, 26, 5, 35, 8]]),
              "attention_mask": torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])}
    case = case_of(_tiny_lm, inputs, config=_tiny_lm().config)
    case._variants = Variants()  # the traced prompt alone (test_generation_requests.py: several requests)
    return case


@needs_onnx
def test_onnx_parts_generate_the_eager_tokens_of_a_text_model(monkeypatch):
    monkeypatch.setenv(_onnx.EXPORTER_ENV, "torch")
    outcome = run_check("onnx_generate", _lm_case())
    assert outcome.verdict == "pass", outcome.reason
    assert outcome.metrics["parts"] == ["embed_prefill", "embed_step", "prefill", "step"]
    assert outcome.metrics["dynamic_parts"] == []
    assert outcome.metrics["max_abs_diff"] <= 1e-4


@needs_onnx
def test_dynamic_inputs_names_the_graph_inputs_with_a_symbolic_dimension(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "sequence"]),
              helper.make_tensor_value_info("mask", TensorProto.INT64, [1, 8]),
              helper.make_tensor_value_info("scale", TensorProto.FLOAT, [None])]
    output = helper.make_tensor_value_info("out", TensorProto.INT64, ["batch", "sequence"])
    graph = helper.make_graph([helper.make_node("Identity", ["ids"], ["out"])], "g", inputs, [output])
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph), str(path))
    assert _onnx.dynamic_inputs(str(path)) == ["ids", "scale"]


@needs_onnx
def test_a_step_whose_runtime_logits_drift_fails_at_that_step(monkeypatch):
    monkeypatch.setenv(_onnx.EXPORTER_ENV, "torch")
    runner = onnx_generate.ort_runner

    def drifting(sessions):
        run = runner(sessions)

        def perturbed(name, *args, **kwargs):
            out = run(name, *args, **kwargs)
            if name == "step":
                out[0] = out[0] + 1e-3
            return out
        return perturbed

    monkeypatch.setattr(onnx_generate, "ort_runner", drifting)
    outcome = run_check("onnx_generate", _lm_case())
    assert outcome.verdict == "fail"
    assert outcome.reason.startswith("decode step 1 of the exported parts vs eager generate: logits differ by "
                                     "0.001 > 0.0001")
    assert outcome.metrics["requests"] == {"traced": outcome.reason}


def test_a_part_that_says_the_check_does_not_apply_while_traced_is_not_an_export_failure(monkeypatch, tmp_path):
    """A generation part raises NotApplicable while traced (a cache layer it cannot carry: `carried_only`); the
    exporter's wrappers re-raise it as their own error. The export says "does not apply", never a failure."""
    from conformance.checks.common.outcome import NotApplicable

    def exporter_wrapping(module, sample, path, shapes):
        try:
            raise NotApplicable("the decoder's static cache holds LinearAttentionLayer layers")
        except NotApplicable as exc:
            raise RuntimeError("export failed while tracing") from exc

    monkeypatch.setattr(_onnx, "_export_torch", exporter_wrapping)
    monkeypatch.setattr(_onnx, "_export_transformers", exporter_wrapping)
    with pytest.raises(NotApplicable, match="LinearAttentionLayer"):
        _onnx.export_onnx_file(torch.nn.Identity(), {"x": torch.zeros(1)}, str(tmp_path / "m.onnx"), {})
