"""compile_prefill and compile_decode on synthetic models whose answer is known.

compile_prefill runs on small nn.Modules; compile_decode needs generate(),
so it runs on a one-layer LlamaForCausalLM (and subclasses that misbehave
in one known way each).
"""

from __future__ import annotations

from typing import Callable

import pytest
import torch

from conformance.cases.samples import Sample
from conformance.cases.tiny import TinyModel
from conformance.checks.common.outcome import run_check
from conformance.checks.common.registry import load_all
from conformance.discover import ModelInfo
from conformance.meta.planted import FactoryCase

load_all()


def synthetic_case(factory: Callable[[], torch.nn.Module], inputs: dict) -> FactoryCase:
    info = ModelInfo(name="Synthetic", model_class=torch.nn.Module, config_class=None, model_type="synthetic",
                     module="conformance.meta", modalities=("text",), tasks=(), kind="synthetic", declared={})
    return FactoryCase(info=info, tiny=TinyModel(info=info, config=None, source="synthetic"),
                         sample=Sample(inputs=inputs, strategy="synthetic"), factory=factory)


# ---- compile_prefill: plain modules -------------------------------------------------------------


class Clean(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.tanh(self.proj(x))


class Breaks(Clean):
    def forward(self, x):
        y = self.proj(x)
        print("", end="")  # a graph break
        return torch.tanh(y)


class BreaksUntilCalled(Clean):
    """Lazy setup on the first call that dynamo cannot trace: only a compile-first trace breaks."""

    ready = False

    def forward(self, x):
        if not self.ready:
            print("", end="")  # stands for untraceable one-time setup (a lock, a hook installation)
            self.ready = True
        return torch.tanh(self.proj(x))


class DiffersWhenCompiled(Clean):
    def forward(self, x):
        y = torch.tanh(self.proj(x))
        return y + 1.0 if torch.compiler.is_compiling() else y


def prefill_case(cls) -> FactoryCase:
    return synthetic_case(cls, {"x": torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(0))})


def test_prefill_passes_on_clean_module():
    outcome = run_check("compile_prefill", prefill_case(Clean))
    assert outcome.verdict == "pass", outcome.reason
    assert outcome.metrics["graph_breaks"] == 0
    assert outcome.metrics["max_abs_diff"] == 0.0


def test_prefill_fails_naming_the_graph_break():
    outcome = run_check("compile_prefill", prefill_case(Breaks))
    assert outcome.verdict == "fail"
    assert "fullgraph compile failed" in outcome.reason
    assert "print" in outcome.reason
    assert "test_checks_compile.py:" in outcome.reason  # the file:line of the break
    assert outcome.metrics["graph_breaks"] >= 1
    assert outcome.metrics["first_break"]


def test_prefill_counts_every_break_site_from_one_trace():
    outcome = run_check("compile_prefill", prefill_case(Breaks))
    fingerprint = outcome.fingerprint
    assert fingerprint.kind == "graph_break" and fingerprint.where.endswith("test_checks_compile:Breaks.forward")
    assert sum(fingerprint.sites.values()) == fingerprint.breaks == outcome.metrics["graph_breaks"] >= 1
    assert all(site.endswith("@ conformance.meta.test_checks_compile:Breaks.forward") for site in fingerprint.sites)


def test_prefill_fails_when_call_order_changes_the_verdict():
    outcome = run_check("compile_prefill", prefill_case(BreaksUntilCalled))
    assert outcome.verdict == "fail"
    assert outcome.reason.startswith("call order changes the verdict")
    assert "compiled after an eager call: pass" in outcome.reason


def test_prefill_fails_when_compiled_logits_differ():
    outcome = run_check("compile_prefill", prefill_case(DiffersWhenCompiled))
    assert outcome.verdict == "fail"
    assert "differ from eager" in outcome.reason
    assert outcome.metrics["max_abs_diff"] == pytest.approx(1.0)


# ---- compile_decode: a one-layer Llama ----------------------------------------------------------


def tiny_llama_config():
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=48, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                       pad_token_id=0, bos_token_id=1, eos_token_id=2)


def llama_factory(cls=None):
    from transformers import LlamaForCausalLM

    return lambda: (cls or LlamaForCausalLM)(tiny_llama_config())


def prompt_inputs() -> dict:
    """Batch 2, the first row left-padded."""
    ids = torch.tensor([[0, 0, 0, 5, 9, 11], [7, 3, 8, 5, 4, 6]])
    return {"input_ids": ids, "attention_mask": (ids != 0).long()}


def _llama_subclass(name: str, forward):
    from transformers import LlamaForCausalLM

    return type(name, (LlamaForCausalLM,), {"forward": forward})


def _recompiling_forward(self, *args, **kwargs):
    from transformers import LlamaForCausalLM

    self.calls = getattr(self, "calls", 0) + 1  # a Python int dynamo specializes on: new value, new graph
    out = LlamaForCausalLM.forward(self, *args, **kwargs)
    out.logits = out.logits + 0 * self.calls
    return out


def _cache_halving_forward(self, *args, **kwargs):
    """Every decode step scales the stored keys: dynamic and static agree, a no-cache forward does not."""
    from transformers import LlamaForCausalLM

    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    ids = kwargs.get("input_ids")
    if cache is not None and ids is not None and ids.shape[1] == 1:
        for layer in cache.layers:
            layer.keys.mul_(0.5)
    return LlamaForCausalLM.forward(self, *args, **kwargs)


def test_decode_passes_on_llama():
    outcome = run_check("compile_decode", synthetic_case(llama_factory(), prompt_inputs()))
    assert outcome.verdict == "pass", outcome.reason
    assert outcome.metrics["recompiles"] == 0
    assert outcome.metrics["decode_steps"] >= 4
    assert outcome.metrics["max_abs_diff_no_cache"] <= 1e-5


def test_decode_fails_naming_the_guard_on_recompiles():
    model = _llama_subclass("RecompilingLlama", _recompiling_forward)
    outcome = run_check("compile_decode", synthetic_case(llama_factory(model), prompt_inputs()))
    assert outcome.verdict == "fail"
    assert "recompiled after the first step" in outcome.reason
    assert "calls" in outcome.reason  # the guard on the attribute that changes every step
    assert outcome.metrics["recompiles"] >= 3  # it changes every step: every decode step after the first recompiles
    fingerprint = outcome.fingerprint
    assert (fingerprint.kind, fingerprint.recompiles) == ("recompile", outcome.metrics["recompiles"])
    assert "calls" in fingerprint.guard and ":" in fingerprint.guard.split(" @ ")[1]


def test_decode_fails_when_the_cache_returns_wrong_values():
    model = _llama_subclass("CacheHalvingLlama", _cache_halving_forward)
    outcome = run_check("compile_decode", synthetic_case(llama_factory(model), prompt_inputs()))
    assert outcome.verdict == "fail"
    assert "forward without cache" in outcome.reason


class BackendCompilerFailed(Exception):
    """Named as dynamo's wrapper around a backend's failure (`checks.common.backend.WRAPPERS`)."""


def test_the_backend_is_blamed_once_dynamo_alone_compiles_and_only_for_what_failed_in_it():
    from conformance.checks.common.backend import backend_failure, blame_backend

    in_backend = BackendCompilerFailed("backend failed")
    in_backend.inner_exception = AssertionError("expected size 4==4, stride 1==4 at dim=0")
    traced = RuntimeError("a graph break")
    alone: list[str] = []
    assert blame_backend("eager", [in_backend], alone.append) == [None] and alone == []
    assert blame_backend("inductor", [traced, None], alone.append) == [None, None] and alone == []
    found = blame_backend("inductor", [in_backend, traced, in_backend], alone.append)
    assert alone == ["eager"]  # one compile with dynamo alone decides for every failure
    assert found == [backend_failure(in_backend, "inductor"), None, backend_failure(in_backend, "inductor")]
    assert found[0][1].kind == "backend" and found[0][0].startswith("inductor failed where dynamo alone traces")

    def dynamo_fails_too(backend: str) -> None:
        raise RuntimeError("dynamo breaks as well")

    assert blame_backend("inductor", [in_backend], dynamo_fails_too) == [None]
