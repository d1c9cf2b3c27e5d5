"""Stage 2, build: a `Case` is one class built tiny with its sample, ready for the checks.

Contracts:

* `Case` is what every check runs on: the class (`info`), its tiny config
  (`tiny`), its sample inputs (`sample`), and the run's device, dtype and
  backend. One Case serves every cell of its class, so nothing a cell gets
  from it is shared: `fresh_model()` is a new instance with the same
  deterministic weights and its own copy of the config, never called
  before; `inputs()` a new copy of the sample on the case's device and
  dtype; `generate_inputs()` what `generate` takes (the sample's
  `generate_inputs` where its strategy set them, else `inputs()`);
  `variants()` the sample's variants (other prompt lengths, batch, images:
  `conformance.cases.variants`), made on first use and kept (only the
  checks that ask for them make them). The tolerance a cell is judged with
  is its check's declaration, not the case's
  (`conformance.checks.common.registry.declared_tolerance`).
* `build_case(info, device, dtype, backend)`: tiny config -> model ->
  sample -> a checked Case. It raises when the tiny model or its inputs
  cannot be made, including when the eager prefill over the sample fails
  (`MissingDependency` when it needs a package that is not installed: its
  cells are not run):
  inputs the model rejects are a gap of this suite (`error`), not a finding
  about the model. Two kinds of rows are decided here without a case
  (`conformance.cases.model_failure.RowVerdict`): `ModelFailure` when the
  model's own code fails (its default config does not build either, or a
  programming error in its forward: a finding, every cell `fail`), and
  `NotStandalone` when the class is not a model a user runs on its own
  (`ModelInfo.not_standalone`: every cell `skip`; its `build` cell still
  says whether the class can be built).
* A case source is where a run gets its classes: `index()` (every accepted
  class name, aliases included -> its canonical name), `names()` (canonical
  names, sorted), `build(name, device, dtype, backend) -> Case` (raising
  when the tiny model or its inputs cannot be made) and `rows(names)` (the
  envelope's row metadata). `TransformersCases` is the source of every real
  run; the harness's own tests supply synthetic ones (the run's
  `pytest_conformance_case_source` hook). Nothing downstream looks at model
  names.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch

from conformance.cases.model_failure import (
    MissingDependency,
    ModelFailure,
    NotStandalone,
    construction_failure,
    forward_failure,
    missing_dependency,
)
from conformance.cases.samples import Sample, make_sample
from conformance.cases.tiny import TinyModel, new_model, tiny_config
from conformance.cases.variants import Variants, make_variants
from conformance.discover import ModelInfo, by_name, class_index, discover, row_metadata
from conformance.reasons import one_line

BUILD_FAILED = "tiny model or inputs could not be built"  # the reason's prefix of a cell whose build failed


@dataclass
class Case:
    """One model under one configuration (device, dtype, backend)."""

    info: ModelInfo
    tiny: TinyModel
    sample: Sample
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    dtype: torch.dtype = torch.float32
    backend: str = "eager"
    seed: int = 0
    _variants: Variants | None = field(default=None, repr=False, compare=False)

    def fresh_model(self) -> torch.nn.Module:
        """A new instance with the same deterministic weights, never called before, with its own copy of the
        tiny config (what a cell sets on its model's config does not reach the next instance or cell)."""
        return new_model(self.tiny, seed=self.seed, device=self.device, dtype=self.dtype,
                         config=copy.deepcopy(self.tiny.config))

    def inputs(self, sample: Sample | None = None) -> dict[str, Any]:
        return (sample or self.sample).to(self.device, self.dtype)

    def generate_inputs(self) -> dict[str, Any]:
        """What `generate` takes: the sample's `generate_inputs` where the strategy set them, else `inputs()`."""
        return self.sample.to(self.device, self.dtype, for_generate=True)

    def variants(self) -> Variants:
        """The sample's variants (other prompt lengths, batch, images; `build.variants`), made once."""
        if self._variants is None:
            with torch.no_grad():
                self._variants = make_variants(self.tiny, self.sample, new_model(self.tiny, seed=self.seed))
        return self._variants


def build_case(info: ModelInfo, device, dtype, backend: str) -> Case:
    """Stage build for one class: tiny config -> model -> sample -> a checked Case (see the module)."""
    try:
        tiny = tiny_config(info)
        with torch.no_grad():
            model = new_model(tiny)
    except Exception as exc:
        missing = missing_dependency(exc)
        if missing:
            raise MissingDependency(missing) from exc
        finding = construction_failure(info, exc)
        if info.not_standalone:
            build = ("fail", finding) if finding else ("error", f"{BUILD_FAILED}: {one_line(exc)}")
            raise NotStandalone(info.not_standalone, build=build) from exc
        if finding:
            raise ModelFailure(finding) from exc
        raise
    if info.not_standalone:
        raise NotStandalone(info.not_standalone)
    with torch.no_grad():
        sample = make_sample(tiny, model)
        try:
            model(**sample.inputs)
        except Exception as exc:
            finding = forward_failure(exc, sample.inputs)
            if finding:
                raise ModelFailure(finding) from exc
            raise RuntimeError(f"eager prefill over the sample fails: {one_line(exc)}") from exc
    del model
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    return Case(info=info, tiny=tiny, sample=sample, device=torch.device(device), dtype=dtype, backend=backend)


class TransformersCases:
    """Every *ForConditionalGeneration class the installed transformers exports."""

    def index(self) -> dict[str, str]:
        return class_index()

    def names(self) -> list[str]:
        return [info.name for info in discover()]

    def build(self, name: str, device, dtype, backend: str) -> Case:
        return build_case(by_name()[name], device, dtype, backend)

    def rows(self, names) -> dict[str, dict]:
        return row_metadata(names)
