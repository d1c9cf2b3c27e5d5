"""Where the plugin gets its models: the classes of the installed transformers.

Contract: a case source has

* `index() -> dict[str, str]`: every accepted class name (aliases included)
  -> its canonical name;
* `names() -> list[str]`: canonical class names, sorted;
* `build(name, device, dtype, backend) -> Case`: the built case, raising any
  exception when the tiny model or its inputs cannot be made;
* `rows(names) -> dict[str, dict]`: row metadata of the envelope.

`TransformersCases` is the source of every real run. A conftest can supply
another one through the `pytest_conformance_case_source(config)` hook (the
harness's own tests do, to run the plugin on small synthetic modules); the
plugin never looks at model names.
"""

from __future__ import annotations

import pytest


def build_case(info, device, dtype, backend: str):
    """Stage build for one class: tiny config -> model -> sample -> a checked Case.

    Raises when the tiny model or its inputs cannot be made, including when
    the eager prefill over the sample fails: inputs the model rejects are a
    gap of this suite (`error`), not a finding about the model.
    """
    import torch

    from conformance.checks.base import Case, one_line
    from conformance.samples import make_sample
    from conformance.tiny import new_model, tiny_config

    tiny = tiny_config(info)
    with torch.no_grad():
        model = new_model(tiny)
        sample = make_sample(tiny, model)
        try:
            model(**sample.inputs)
        except Exception as exc:
            raise RuntimeError(f"eager prefill over the sample fails: {one_line(exc)}") from exc
    del model
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    return Case(info=info, tiny=tiny, sample=sample, device=torch.device(device), dtype=dtype, backend=backend)


class CaseSourceHooks:
    """Hook specifications the plugin adds to pytest."""

    @pytest.hookspec(firstresult=True)
    def pytest_conformance_case_source(self, config):
        """Return the case source of this run (see conformance.case_source), or None for the default."""


class TransformersCases:
    """Every *ForConditionalGeneration class the installed transformers exports."""

    def index(self) -> dict[str, str]:
        from conformance.discover import by_name

        return {name: info.name for name, info in by_name().items()}

    def names(self) -> list[str]:
        from conformance.discover import discover

        return [info.name for info in discover()]

    def build(self, name: str, device, dtype, backend: str):
        from conformance.discover import by_name

        return build_case(by_name()[name], device, dtype, backend)

    def rows(self, names) -> dict[str, dict]:
        from conformance import report

        return report.model_rows(names)
