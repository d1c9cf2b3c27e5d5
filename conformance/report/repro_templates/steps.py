"""What a reproducer template is given (`Context`) and what it gives back (`Steps`).

Contracts:

* A `Context` is one failing cell of a group and what the suite knows of
  it: the group, the cell (its fingerprint and reason), the recorded cell
  of the run file (its metrics), the `Case` of its class (None when the
  tiny model cannot be built: then `sample` is None too), the backend
  the cell ran under (a column ``check@backend`` names its own) and the
  run's dtype (the script builds its model and inputs in it).
* A template is ``template(ctx) -> Steps``: the body of the script's
  ``reproduce()`` (the check's steps up to the call that fails, or the
  comparison that does), the pieces of `conformance.report.repro_parts` it
  calls, extra imports, module-level constants (name -> source) and the
  inputs ``sample_inputs()`` returns (default: the case's sample, the
  prefill every check starts from), those of the check's other requests a
  script serves (``<name>_inputs()``, e.g. ``longer_inputs()``), with notes for the header on what it
  leaves out. A template that cannot write a cell's failure standalone
  raises `NoTemplate` saying why; the index lists that cell with the reason.
* Which template writes which check is the table of `conformance.report.repro_templates`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class NoTemplate(Exception):
    """This cell's failure cannot be written as a standalone script; the message says why."""


@dataclass
class Context:
    group: Any  # findings.Group
    cell: Any  # findings.FailingCell
    recorded: dict  # the run file's cell (metrics, reason, fingerprint)
    case: Any  # conformance.cases.case.Case, or None when the tiny model cannot be built
    check: str
    backend: str
    dtype: str  # the run's dtype name (float32, bfloat16, float16)
    sample: dict | None = None  # the case's prefill inputs (None without a case or a sample)

    @property
    def fingerprint(self) -> dict:
        return self.cell.fingerprint

    @property
    def kind(self) -> str:
        return self.cell.fingerprint.get("kind", "")

    @property
    def metrics(self) -> dict:
        return dict(self.recorded.get("metrics") or {})


@dataclass
class Steps:
    body: list[str]  # lines of reproduce(), unindented
    parts: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    constants: dict[str, str] = field(default_factory=dict)
    inputs: dict | None = None  # what sample_inputs() returns; None: the context's sample
    requests: dict[str, dict] = field(default_factory=dict)  # name -> what <name>_inputs() returns (another request)
    notes: list[str] = field(default_factory=list)
    uses_sample: bool = True  # False: the script builds no inputs (the model itself cannot be built)

