"""Planted-bug self-tests of the `exporter_*` columns (transformers.exporters on every backend).

For each backend's forward and generation column: the correct model (`planted.TinyLM`) passes; a model whose
runner output is off by 1e-3 (`ExportedNumericsLM`, `ExportedDecodeNumericsLM`) fails naming the difference; one
with an operator the backend cannot lower fails naming the exporter's own error; for generation, one whose
``generate`` bypasses its forward cannot be decomposed and fails with transformers' own reason, and one whose
media encoder runs outside the exported components fails naming it. Columns whose packages are not installed are
skipped with the install command; where transformers has no ``transformers.exporters`` every column is n.a.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from conformance.checks.common import exporter_table, exporters
from conformance.checks.common.outcome import run_check
from conformance.checks.common.registry import description, load_all, unavailable
from conformance.meta import planted

pytestmark = pytest.mark.meta

load_all()
BACKENDS = tuple(exporters.BACKENDS)
needs_exporters = pytest.mark.skipif(not exporters.has_exporters(),
                                     reason="the installed transformers has no transformers.exporters")


def exporter_ready(model_class: type) -> type:
    """`model_class` doing what transformers' models do and `planted.TinyLM` does not: ``use_cache=None`` reads
    ``config.use_cache``. The exporters pop ``use_cache`` from the traced inputs and set it on the config
    (`prepare_for_export`); a model that ignored the config would return no cache from its exported prefill.
    The forward keeps its signature (generate validates its kwargs against it)."""

    def forward(self, *args, **kwargs):
        if kwargs.get("use_cache") is None:
            kwargs["use_cache"] = self.config.use_cache
        return model_class.forward(self, *args, **kwargs)

    forward.__signature__ = inspect.signature(model_class.forward)
    return type(model_class.__name__, (model_class,), {"forward": forward, "__doc__": model_class.__doc__})


class UnloweredOpLM(planted.TinyLM):
    """`kthvalue` in the head: an operator the ONNX, ExecuTorch and OpenVINO backends have no lowering for."""

    def adjust(self, logits, decode, cache):
        return logits - torch.kthvalue(logits, 2, dim=-1, keepdim=True).values


class BypassedForwardLM(planted.TinyLM):
    """Its `__call__` skips `forward`: generate works, but transformers' decomposition captures no forward call."""

    def __call__(self, *args, **kwargs):
        return planted.TinyLM.forward(self, *args, **kwargs)


class VisionTower(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(12, planted.HIDDEN)

    def forward(self, pixel_values):
        return self.proj(pixel_values.flatten(1)).unsqueeze(1)


class EncoderOutsideLM(planted.TinyLM):
    """A multimodal model (a `vision_tower` and a `language_model` transformers finds) whose `generate` computes
    the image features before the first forward and hands them over, as transformers 5.24's `generate` does
    (`mm_encoder_outputs`): its decomposition never sees the encoder run, so no component covers it."""

    def __init__(self, config=None):
        super().__init__(config)
        self.vision_tower = VisionTower()
        self.language_model = torch.nn.Identity()

    def get_decoder(self):
        return self.language_model

    def get_image_features(self, pixel_values):
        return self.vision_tower(pixel_values)

    def generate(self, *args, pixel_values=None, **kwargs):
        if pixel_values is not None:
            with torch.no_grad():
                kwargs["image_features"] = self.get_image_features(pixel_values)
        return super().generate(*args, **kwargs)

    @planted._one_cache_keyword
    def forward(self, input_ids=None, attention_mask=None, cache=None, past_key_values=None, inputs_embeds=None,
                pixel_values=None, image_features=None, use_cache=None, cache_position=None, logits_to_keep=0,
                **kwargs):
        if inputs_embeds is None:
            inputs_embeds = self.embed(input_ids)
            if image_features is not None:
                inputs_embeds = inputs_embeds + (input_ids == planted.IMAGE_TOKEN).unsqueeze(-1) * image_features
            elif pixel_values is not None:
                inputs_embeds = self.image_embeds(inputs_embeds, input_ids, pixel_values)
        return super().forward(attention_mask=attention_mask, cache=cache, past_key_values=past_key_values,
                               inputs_embeds=self.language_model(inputs_embeds), use_cache=use_cache,
                               cache_position=cache_position, **kwargs)


MODELS = {"UnloweredOpLM": UnloweredOpLM, "BypassedForwardLM": BypassedForwardLM,
          "EncoderOutsideLM": EncoderOutsideLM}
# The backends with no lowering for `kthvalue` (torch.export itself takes it): their exporter says so. OpenVINO's
# frontend converts it, wrongly (the logits differ, compiled in f32): that is its verdict on the same model.
UNLOWERED = {"onnx": ["export(dynamic=True)", "kthvalue"], "executorch": ["export(dynamic=True)", "kthvalue"],
             "openvino": ["openvino runner logits on the sample", "logits differ from eager"]}
# OpenVINO's default decode component is stateful (its cache in the compiled model's variables): a runner over it
# cannot be driven by the decomposition, whatever the model (an upstream finding, transformers' runner unflatten).
STATEFUL_DECODE = ("OpenVINO's stateful decode component: its runner fails to unflatten the outputs "
                   "(transformers/exporters/runners/base.py), for every model")

# (check, planted model, with media, substrings every one of which the reason must contain)
PLANTED = []
for _backend in BACKENDS:
    PLANTED += [
        (f"exporter_{_backend}_forward", "ExportedNumericsLM", False, [f"{_backend} runner logits on the sample",
                                                                       "0.001"]),
        (f"exporter_{_backend}_forward", "UnloweredOpLM", False, UNLOWERED.get(_backend, [])),
        (f"exporter_{_backend}_generate", "BypassedForwardLM", False, ["export_for_generation",
                                                                       "decompose_prefill_decode expected at least"]),
    ]
    if _backend != "openvino":
        PLANTED.append((f"exporter_{_backend}_generate", "ExportedDecodeNumericsLM", False,
                        ["step 1", "differ from eager generate", "0.001"]))
PLANTED = [entry for entry in PLANTED if entry[3]]  # torch.export lowers kthvalue: no such bug for dynamo
PLANTED.append(("exporter_dynamo_generate", "EncoderOutsideLM", True, ["left ['image_encoder'] out of its components",
                                                                      "without pytorch"]))
CORRECT = [f"exporter_{backend}_{stage}" for backend in BACKENDS for stage in ("forward", "generate")]


def installed(check_id: str) -> None:
    why = unavailable(check_id)
    if why:
        pytest.skip(f"{check_id} {why}")


def model_class(name: str):
    return exporter_ready(MODELS.get(name) or getattr(planted, name))


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@needs_exporters
@pytest.mark.parametrize("check_id", CORRECT)
def test_the_correct_model_passes(check_id):
    installed(check_id)
    outcome = run_check(check_id, planted.case_for(model_class("TinyLM")))
    if check_id == "exporter_openvino_generate" and outcome.verdict == "fail":
        # The known upstream failure, and only it: a pass (fixed upstream) passes this test too.
        assert "StopIteration" in outcome.reason, f"{STATEFUL_DECODE}; got {outcome.reason}"
        assert outcome.fingerprint.where.startswith("transformers.exporters.runners."), outcome.fingerprint
        return
    assert outcome.verdict == "pass", outcome.reason
    if check_id.startswith("exporter_openvino_"):
        # Compiled in the export's float32 whatever the CPU's default (bf16 where it has it): one verdict on every CPU.
        assert outcome.metrics["inference_precision"] == "f32", outcome.metrics
        assert outcome.metrics["default_precision"] in ("bf16", "f16", "f32"), outcome.metrics
    assert planted.judged_as_declared(check_id, outcome.metrics), outcome.metrics


@needs_exporters
@pytest.mark.parametrize("check_id,model,media,substance", PLANTED, ids=[f"{c}-{m}" for c, m, _, _ in PLANTED])
def test_a_planted_bug_turns_the_cell_red_naming_the_bug(check_id, model, media, substance):
    installed(check_id)
    outcome = run_check(check_id, planted.case_for(model_class(model), media=media))
    assert outcome.verdict == "fail", f"{model} gave {outcome.verdict} on {check_id}: {outcome.reason} {outcome.metrics}"
    reason = outcome.reason.lower()
    missing = [s for s in substance if s.lower() not in reason]
    assert not missing, f"reason {outcome.reason!r} does not name {missing}"
    assert outcome.fingerprint is not None and outcome.fingerprint.kind != "harness_error"


def test_every_exporter_column_has_planted_bugs():
    """The float columns' (the quantized columns' are `test_checks_quantized`'s)."""
    quantized = {row.id for row in exporter_table.COLUMNS if row.quantizer}
    columns = {check_id for check_id in load_all() if check_id.startswith("exporter_")} - quantized
    assert columns == {f"exporter_{b}_{s}" for b in BACKENDS for s in ("forward", "generate")}
    assert columns <= {check_id for check_id, *_ in PLANTED}


def test_the_exporter_columns_are_the_rows_of_one_table():
    """One check per row of `exporter_table.COLUMNS`, registered by one module, its number, tolerance and
    packages (or opt-in group) from the row and its backend, its contract written from the table."""
    checks = load_all()
    rows = exporter_table.COLUMNS
    assert {c for c in checks if c.startswith("exporter_")} == {row.id for row in rows}
    assert len({row.number for row in rows}) == len(rows) and len({row.id for row in rows}) == len(rows)
    for row in rows:
        spec, backend = checks[row.id], exporter_table.BACKENDS[row.backend]
        assert spec.module == "conformance.checks.exporter_columns", spec.module
        assert (spec.column, spec.tolerance) == (row.number, "export")
        registration = exporter_table.row_registration(row)
        assert (spec.requires, spec.extra, spec.opt_in) == (registration.get("requires", ()),
                                                            registration.get("extra", ""),
                                                            registration.get("opt_in", ""))
        if row.quantizer:
            assert spec.compares == () and set(backend.requires) <= set(spec.requires), spec
        assert spec.run.__name__ == f"check_{row.id}"
        contract = inspect.getdoc(spec.run)
        assert contract == exporter_table.contract(row).strip()
        assert contract.startswith(f"Check `{row.id}`: ") and backend.title in contract and backend.runner in contract
        assert description(spec) == contract.splitlines()[0].removeprefix(f"Check `{row.id}`: ")
    assert exporter_table.column("exporter_onnx_generate").backend == "onnx"
    with pytest.raises(KeyError, match="known: exporter_dynamo_forward"):
        exporter_table.column("exporter_nothing_forward")


def test_a_row_names_a_known_backend_and_part_and_a_quantizer_it_takes():
    with pytest.raises(ValueError, match="backend one of"):
        exporter_table.Column("tensorrt", "forward", 200)
    with pytest.raises(ValueError, match="part one of"):
        exporter_table.Column("dynamo", "decode", 200)
    with pytest.raises(ValueError, match="quantizer one of"):
        exporter_table.Column("dynamo", "forward", 200, quantizer="ort_dynamic")
    with pytest.raises(ValueError, match="quantizer one of"):
        exporter_table.Column("onnx", "forward", 200, quantizer="gptq")
    assert exporter_table.Column("onnx", "forward", 200, quantizer="ort_dynamic").id == "exporter_onnx_ort_dynamic_forward"


def test_without_transformers_exporters_every_column_does_not_apply(monkeypatch):
    monkeypatch.setattr(exporters, "has_exporters", lambda: False)
    for check_id in sorted(c for c in load_all() if c.startswith("exporter_")):
        if unavailable(check_id):
            continue
        outcome = run_check(check_id, planted.case_for(model_class("TinyLM")))
        assert outcome.verdict == "skip", (check_id, outcome.reason)
        assert outcome.reason.startswith("no transformers.exporters in transformers "), outcome.reason


@needs_exporters
def test_a_failure_inside_transformers_exporters_is_an_upstream_site():
    """The exporter's own code counts as transformers: its site is a finding, never the suite's."""
    from transformers.exporters import utils as exporter_utils  # noqa: F401  (needs the package)

    try:
        exporter_utils.decompose_prefill_decode(BypassedForwardLM().eval(), {"input_ids": torch.ones(1, 3).long()})
    except RuntimeError as exc:
        violation = exporters.exporter_failure(exc, "stage", {})
    else:
        pytest.fail("the planted model was decomposed")
    assert violation.fingerprint.where.startswith("transformers.exporters.utils:"), violation.fingerprint
    assert "(at transformers/exporters/utils.py:" in violation.reason, violation.reason


def test_a_program_that_bakes_a_python_scalar_of_its_inputs_says_which():
    """torch.export's "inputs do not match the traced tree spec" names the field whose value was baked in."""
    text = ("Trying to flatten user inputs with exported input tree spec: \nTreeSpec(StaticCache, {'layers': [{'keys': "
            "{'_t': 'tensor', 'i': 0}, 'cumulative_length_int': 17, 'max_cache_len': 18}]}) but actually got inputs "
            "with tree spec of: \nTreeSpec(StaticCache, {'layers': [{'keys': {'_t': 'tensor', 'i': 0}, "
            "'cumulative_length_int': 18, 'max_cache_len': 18}]}).")
    assert exporters.spec_difference(text) == " (traced cumulative_length_int 17, called with 18)"
    assert exporters.spec_difference("another error") == ""


class _NoMethod:
    """A class attribute that is not there: `hasattr(instance, name)` is False (PI0's missing `generate`)."""

    def __get__(self, instance, owner=None):
        raise AttributeError("generate")


class NoGenerateLM(planted.TinyLM):
    generate = _NoMethod()


@needs_exporters
def test_a_class_without_generate_has_no_generation_column_to_fail():
    """A class without generate() (PI0) has nothing for export_for_generation to decompose: does not apply, said so;
    never the suite's own AttributeError published as the model's failure."""
    for check_id in sorted(c for c in load_all() if c.startswith("exporter_") and c.endswith("_generate")):
        if unavailable(check_id):
            continue
        outcome = run_check(check_id, planted.case_for(exporter_ready(NoGenerateLM)))
        assert outcome.verdict == "skip", (check_id, outcome.verdict, outcome.reason)
        assert "has no generate()" in outcome.reason, outcome.reason
