"""Failure fingerprints: what failed and where, stable across unrelated edits, specific enough to tell failures apart.

A failing cell (fail, error, timeout) carries a `Fingerprint`; an expectation
lists the fingerprint it was measured with; the gate compares the two
(`compare`). Fields (all optional but `kind`):

* `kind`: what kind of failure (`KINDS`): a graph break, a data-dependent
  guard, an unsupported construct, a recompile, a dimension that had to stay
  dynamic and that a guard of the model's code specialised or bounded
  (`specialisation`: the dynamic-shape columns), a numerical mismatch, a
  failure of the compile backend where dynamo alone traces fullgraph
  (`backend`: inductor's lowering, code generation or generated code), an
  exception of the model under the check, an export error, a harness error,
  a fatal error in native code that code outside the suite called (`fatal_error`: ExecuTorch's runtime,
  a torch kernel; `where` is the innermost Python frame), a crash of the process running the cell that the
  suite cannot attribute (`crash`: no traceback, or the suite's own frame), a timeout, a cell that needed more
  memory than its limit or the machine gave (`resources`: the cell's own cost, listable like any failure; `what`
  says which limit, the peak is in the metrics), or a contract the check states in words (`contract`);
* `where`: the place in code as ``module:qualname`` (`conformance.reasons.site`),
  no line numbers, so moving code does not change it;
* `error`: the exception type that decided, when one did;
* `what`: for `contract`, the check's reason with numbers and shapes masked
  (``logits differ from eager by # > #``); for `backend`, the backend's message masked;
* `sites` / `breaks`: for compile cells, each graph-break site
  (``<first line of the reason> @ <module:qualname>``) with how often it
  broke, and the total count;
* `recompiles` / `guard`: for decode, how many recompiles and the first
  failed guard (``<guard expression> @ <module:qualname>``); for a
  specialisation, the guard that pinned the dimension, masked;
* `cold` / `warm`: for call-order cells, the verdict compiled before any
  eager call and after one.

`compare(listed, observed)` is one of ``same``, ``improved`` (the same
failure with fewer graph breaks or recompiles: the expectation must be
tightened), ``changed`` (another failure, or more breaks or recompiles) or
``unlisted`` (the expectation has no fingerprint). Torch-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

KINDS = ("graph_break", "data_dependent_guard", "unsupported", "recompile", "specialisation", "numerical_mismatch",
         "backend", "exception", "export_error", "call_order", "contract", "harness_error", "fatal_error",
         "crash", "timeout", "resources")
COUNTS = ("breaks", "recompiles")  # fewer than listed: improved; more: changed

# The suite's own failures (docs/design.md, "a model's failure or the suite's"): two questions, two answers.
SUITE_SITE = "conformance."  # a site (`where`) in this package: the suite's own code, whatever the kind says
# What an expectation may list a failure of the suite's own code as: a known gap of the suite, never a finding.
LISTABLE_SUITE_KINDS = ("harness_error",)
# What every view counts as the suite's own (🚧): its code raised, or its worker died with no traceback or while
# building (a crash in transformers' or a backend's frame is `fatal_error`, the model's).
SUITE_OWN_KINDS = ("harness_error", "crash")
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|\.\d+)(?![\w.])", re.IGNORECASE)
SHAPE = re.compile(r"\((?:\s*[-\w]+\s*,)+\s*[-\w]*\s*\)|\[(?:\s*[-\w]+\s*,)+\s*[-\w]*\s*\]")


class FingerprintError(ValueError):
    """A fingerprint in a file is malformed; the message says which field and why."""


def mask(text: str) -> str:
    """`text` with numbers and shapes replaced by ``#``: the words of a reason, not its measurements."""
    return " ".join(NUMBER.sub("#", SHAPE.sub("#", text)).split())


@dataclass(frozen=True)
class Fingerprint:
    kind: str
    where: str = ""
    error: str = ""
    what: str = ""
    sites: dict[str, int] = field(default_factory=dict, hash=False)
    breaks: int | None = None
    recompiles: int | None = None
    guard: str = ""
    cold: str = ""
    warm: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise FingerprintError(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")

    # -- data

    def to_data(self) -> dict:
        """The non-empty fields as plain data (TOML and JSON can hold it)."""
        data = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value in ("", None) or value == {}:
                continue
            data[f.name] = dict(sorted(value.items())) if isinstance(value, dict) else value
        return data

    @classmethod
    def from_data(cls, data) -> "Fingerprint":
        """A Fingerprint from `to_data`'s output; FingerprintError naming the bad field."""
        if not isinstance(data, dict):
            raise FingerprintError("a fingerprint is a table of fields (kind, where, ...)")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise FingerprintError(f"unknown fingerprint field {unknown[0]!r}; known: {', '.join(known)}")
        if "kind" not in data:
            raise FingerprintError("a fingerprint needs a `kind`")
        values = {}
        for name, value in data.items():
            if name == "sites":
                if not isinstance(value, dict) or not all(isinstance(k, str) and _is_count(v) for k, v in value.items()):
                    raise FingerprintError("`sites` is a table of site = count")
            elif name in COUNTS:
                if not _is_count(value):
                    raise FingerprintError(f"`{name}` is a whole number")
            elif not isinstance(value, str):
                raise FingerprintError(f"`{name}` is a string, got {value!r}")
            values[name] = value
        return cls(**values)

    # -- comparing

    def identity(self) -> tuple:
        """What two fingerprints of the same failure share (the sites and counts may move: see `compare`)."""
        return (self.kind, self.where, self.error, self.what, self.guard, self.cold, self.warm)

    def summary(self) -> str:
        """One line for a person."""
        parts = [self.kind + (f" {self.error}" if self.error else "")]
        if self.where:
            parts.append(f"at {self.where}")
        if self.what:
            parts.append(f"({self.what})")
        if self.breaks is not None:
            parts.append(f"{self.breaks} graph break(s) at {len(self.sites)} site(s)")
        if self.recompiles is not None:
            parts.append(f"{self.recompiles} recompile(s)" + (f" on {self.guard}" if self.guard else ""))
        if self.cold or self.warm:
            parts.append(f"cold {self.cold or '?'}, warm {self.warm or '?'}")
        return " ".join(parts)


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class Comparison:
    status: str  # same | improved | changed | unlisted
    message: str = ""


def compare(listed: Fingerprint | None, observed: Fingerprint | None) -> Comparison:
    """How an observed failure relates to the listed one (see the module).

    The same failure (kind, site, exception, guard, cold and warm verdicts)
    with a graph-break site the listing does not have, or more breaks at a
    site, or more breaks or recompiles in all, has changed; with no new site
    and fewer breaks or recompiles it has improved.
    """
    if listed is None:
        return Comparison("unlisted", "listed without a fingerprint")
    if observed is None:
        return Comparison("changed", f"failure changed: listed {listed.summary()}, now a failure without a fingerprint")
    if listed.identity() != observed.identity():
        return Comparison("changed", f"failure changed: listed {listed.summary()}; now {observed.summary()}")
    new_sites = [s for s in observed.sites if s not in listed.sites]
    if new_sites:
        return Comparison("changed", f"failure changed: new graph-break site {new_sites[0]}"
                                     + (f" (and {len(new_sites) - 1} more)" if len(new_sites) > 1 else "")
                                     + f"; now {observed.summary()}")
    more = [s for s, n in observed.sites.items() if n > listed.sites[s]]
    worse = [name for name in COUNTS if _more(getattr(observed, name), getattr(listed, name))]
    if more or worse:
        detail = [f"{getattr(listed, n)} -> {getattr(observed, n)} {n}" for n in worse]
        detail += [f"{listed.sites[s]} -> {observed.sites[s]} breaks at {s}" for s in more[:1]]
        return Comparison("changed", "failure changed: " + ", ".join(detail))
    gone = [s for s in listed.sites if s not in observed.sites]
    better = [name for name in COUNTS if _more(getattr(listed, name), getattr(observed, name))]
    if gone or better:
        detail = [f"{getattr(listed, n)} -> {getattr(observed, n)} {n}" for n in better]
        detail += [f"no break at {s} any more" for s in gone[:1]]
        return Comparison("improved", "improved: " + ", ".join(detail))
    return Comparison("same")


def _more(a: int | None, b: int | None) -> bool:
    return a is not None and b is not None and a > b


# --------------------------------------------------------------------------- from what happened

DATA_DEPENDENT = ("Could not guard on data-dependent", "data-dependent expression", "GuardOnDataDependentSymNode",
                  "DataDependentOutputException", "PendingUnbackedSymbolNotFound")
TRANSFORMERS_FILE = re.compile(r'File "([^"]*/transformers/[^"]+)", line (\d+)')


def kind_of(exc: BaseException, default: str = "exception") -> str:
    """The kind of failure an exception is: a data-dependent guard, an unsupported construct, or `default`."""
    return kind_from(type(exc).__name__, str(exc), default)


def kind_from(error: str, message: str, default: str = "exception") -> str:
    """`kind_of` of an exception known by its type's name and its message (a printed traceback's last line)."""
    if any(marker in f"{error}: {message}" for marker in DATA_DEPENDENT):
        return "data_dependent_guard"
    if error == "Unsupported":
        return "unsupported"
    return default


def where_of(exc: BaseException) -> str:
    """The site an exception points at: a transformers frame its message names (strict export traces
    symbolically, so its traceback ends in torch), else its traced stack or traceback."""
    import traceback

    return where_from(str(exc), traceback.extract_tb(exc.__traceback__), getattr(exc, "real_stack", None))


def where_from(message: str, frames, real_stack=None) -> str:
    """`where_of` of an exception known by its message, its traceback's frames and dynamo's traced stack (None
    when it has none): objects with `filename`, `lineno` and `name`, as `traceback.FrameSummary`."""
    from conformance.reasons import site, stack_site

    named = TRANSFORMERS_FILE.findall(message)
    if named:
        path, line = named[-1]
        return site(path, int(line))
    return stack_site(frames, real_stack)


def of_exception(exc: BaseException, default: str = "exception") -> Fingerprint:
    """The fingerprint of a failure that an exception decided."""
    return Fingerprint(kind_of(exc, default), where=where_of(exc), error=type(exc).__name__)


def of_reason(reason: str, cause: BaseException | None = None) -> Fingerprint:
    """The fingerprint of a contract violation stated in words: its masked reason, and the exception behind
    it when there is one (a violation it wraps: that violation's own fingerprint)."""
    listed = getattr(cause, "fingerprint", None)  # a violation wrapping another keeps the inner one's fingerprint
    if isinstance(listed, Fingerprint):
        return listed
    if cause is not None and isinstance(getattr(cause, "reason", None), str):
        # A violation without a fingerprint of its own, re-raised with metrics (a served column's export): the
        # fingerprint is its own, from its words or the exception it wraps, never the re-raising frame's.
        return of_reason(cause.reason, cause.__cause__)
    if cause is not None:
        found = of_exception(cause)
        return Fingerprint(found.kind, where=found.where, error=found.error)
    return Fingerprint("contract", what=mask(reason))
