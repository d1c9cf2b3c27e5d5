"""Stage 4, report: what run files say each class's declared capability flags should be.

For every class and every flag that a check of the run observes
(`check_info[check]["observes"]`), `advise(envelopes, sources)` gives one
`Advice`. Whether a declaration disagrees with the observation is the
report's rule (`render.flag_disagreements`); this module adds which
disagreements are unambiguous enough to change the declaration:

* **set True**: "observed but not declared" (every observing check that
  applies passed, at least one did);
* **set False**: "declared but not observed", and an observing check failed
  (raw verdict fail) with a failure that is evidence about the flag
  (`evidence_kinds`: for the compile flag, what the compiler reports, a
  graph break, a data-dependent guard, an unsupported construct, a recompile,
  or compiled logits that differ from eager; for other flags also a broken
  contract stated in words), the same in either call order, on a class whose
  `build` cell passed;
* **ambiguous** (left alone): every failing observing cell is a harness error
  or a timeout (the suite could not observe the check), a failure that
  depends on call order (compiled before any eager call it fails, after one it
  passes: fix the cause, see `conformance findings`), an exception or a broken
  contract that is not the compiler's (generate refusing the sample, a cache
  returning wrong values in eager decoding too), or the class does not build;
* **unobserved**: no disagreement, but an observing cell is a harness error
  or a timeout; **agrees**: no disagreement, every observing cell observed;
  **undeclared**: the class has no such
  attribute (transformers 5 dropped `_supports_static_cache` from
  `PreTrainedModel`), so there is nothing to set.

The kind of a failure is its fingerprint's (`conformance.fingerprints`); a
run file older than fingerprints is read by the markers of its reason
(`reason_kind`: the data-dependent markers of the fingerprints, ``Unsupported``,
``recompiled``, ``graph break``), and a reason without one is not the
compiler's.

A checkpoint profile's row (`conformance.profiles`) is the same class under
another config: it gets no advice of its own (the class's declaration is
advised from its default row; where a profile's verdict differs, `conformance
findings` says so).

Several runs (of one transformers version): a flag whose observation depends
on the dynamo backend (`columns.BACKEND_FLAGS`) is decided by a run whose
`environment.backend` is `columns.PREFERRED_BACKEND` (inductor) where that
run observed the class, else by the first run given; every other flag by
the first run that observed the class. Each advice names the backend and
the run file it is from. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.columns import BACKEND_FLAGS, PREFERRED_BACKEND, backend_of
from conformance.fingerprints import DATA_DEPENDENT
from conformance.report.findings import cause_of
from conformance.report.render import flag_checks, flag_disagreements, observing_cells

ACTIONS = ("set", "ambiguous", "unobserved", "agrees", "undeclared")
# The reason a check gives when the verdict depends on call order (conformance.checks.compile_prefill), for run
# files older than fingerprints; newer cells say so in their fingerprint (kind call_order).
CALL_ORDER_REASON = "call order changes the verdict"
# Failure kinds that say compiling itself failed (conformance.fingerprints.KINDS); an `exception` or `contract`
# of a compile check is the model's or generate's, and may fail without compiling too.
COMPILER_KINDS = ("graph_break", "data_dependent_guard", "unsupported", "recompile", "numerical_mismatch", "backend")
REASON_MARKERS = (("data_dependent_guard", DATA_DEPENDENT), ("unsupported", ("Unsupported",)),
                  ("recompile", ("recompiled",)), ("graph_break", ("graph break",)))


class AdviceError(ValueError):
    """Run files that cannot be advised on together; the message is one line for a person."""


@dataclass(frozen=True)
class Evidence:
    """One observing cell: the check, its verdict as recorded, what the check itself said, and its reason."""

    check: str
    verdict: str
    raw: str
    reason: str

    def line(self) -> str:
        said = self.verdict if self.raw == self.verdict else f"{self.verdict} (raw {self.raw})"
        return f"{self.check} {said}" + (f": {self.reason}" if self.reason and self.raw != "pass" else "")


@dataclass(frozen=True)
class Advice:
    model: str
    flag: str
    declared: object  # the class's value; None when it has no such attribute
    action: str  # one of ACTIONS
    value: bool | None  # what the observation supports (action "set": the new value)
    why: str  # one line: the rule that decided
    evidence: tuple[Evidence, ...]
    backend: str  # of the run the advice is from
    source: str  # that run file
    cause: str = ""  # the findings group of the failure that decided a False (`findings.cause_of`)

    def line(self) -> str:
        """`Class: flag True -> False (eager): compile_prefill fail: ...` for a summary."""
        change = (f"{self.declared} -> {self.value}" if self.action == "set"
                  else f"{self.declared} ({self.action}: {self.why})")
        observed = "; ".join(e.line() for e in self.evidence)
        return f"{self.model}: {self.flag} {change} [{self.backend} backend]: {observed}"


def is_call_order(cell: dict) -> bool:
    """Whether a failing cell failed in one call order only (cold fail, warm pass, or the reverse)."""
    fingerprint = cell.get("fingerprint") or {}
    if fingerprint:
        return fingerprint.get("kind") == "call_order"
    return cell.get("reason", "").startswith(CALL_ORDER_REASON)


def evidence_kinds(flag: str) -> tuple[str, ...]:
    """The failure kinds that say a flag's claim does not hold (an exception of the model or of generate may
    fail without the feature as well: it is no evidence)."""
    return COMPILER_KINDS if flag in BACKEND_FLAGS else COMPILER_KINDS + ("contract",)


def reason_kind(reason: str) -> str:
    """The failure kind a reason names by its markers (run files older than fingerprints); "" for none."""
    return next((kind for kind, markers in REASON_MARKERS if any(m in reason for m in markers)), "")


def failure_kind(cell: dict) -> str:
    """The kind of a failing cell: its fingerprint's, else what its reason names (`reason_kind`)."""
    return (cell.get("fingerprint") or {}).get("kind") or reason_kind(cell.get("reason", ""))


def _evidence(cells: dict[str, dict]) -> tuple[Evidence, ...]:
    return tuple(Evidence(c, cell["verdict"], cell["observed"], cell.get("reason", "")) for c, cell in cells.items())


def _declared_false(row: dict, flag: str, evidence: tuple[Evidence, ...]) -> tuple[str, bool | None, str, str]:
    """(action, value, why, cause) for a true flag that an observing check contradicts."""
    build = row["cells"].get("build")
    if build is not None and build["observed"] != "pass":
        return "ambiguous", None, f"the class does not build (build {build['verdict']})", cause_of(build)
    cells = {e.check: row["cells"][e.check] for e in evidence}
    failed = [e for e in evidence if e.raw == "fail"]
    telling = [e for e in failed if not is_call_order(cells[e.check]) and failure_kind(cells[e.check])
               in evidence_kinds(flag)]
    if telling:
        decided = cells[telling[0].check]
        return "set", False, f"{telling[0].check} failed ({failure_kind(decided)})", cause_of(decided)
    order = [e for e in failed if is_call_order(cells[e.check])]
    if order:
        return ("ambiguous", None, "the failure depends on call order (fix its cause, not the flag)",
                cause_of(cells[order[0].check]))
    if failed:
        kind = failure_kind(cells[failed[0].check]) or "its reason names no failure kind"
        return ("ambiguous", None, f"the failure ({kind}) may not be about {flag}: see conformance findings",
                cause_of(cells[failed[0].check]))
    return "ambiguous", None, "the suite could not observe it (harness error or timeout)", ""


def advise_one(envelope: dict, source: str) -> dict[tuple[str, str], Advice]:
    """(class, flag) -> Advice for one run, for every class that has a cell of a check observing the flag."""
    overclaimed, underclaimed = flag_disagreements(envelope)
    over = {(d.model, d.flag): d for d in overclaimed}
    under = {(d.model, d.flag): d for d in underclaimed}
    advice = {}
    for flag, checks in flag_checks(envelope).items():
        for name, row in envelope["models"].items():
            if row.get("profile"):  # a checkpoint profile's row: the class's flags are its default row's to advise
                continue
            cells = observing_cells(envelope, row, flag, checks)
            evidence = _evidence(cells)
            if all(e.raw == "skip" for e in evidence):  # no cell, or none applies: nothing observed
                continue
            backend = backend_of(envelope, evidence[0].check)
            declared = row.get("declared", {}).get(flag)
            cause = ""
            if flag not in row.get("declared", {}):
                action, value, why = "undeclared", None, "the class has no such attribute"
            elif (name, flag) in under:
                action, value, why = "set", True, "every observing check that applies passed"
            elif (name, flag) in over:
                action, value, why, cause = _declared_false(row, flag, evidence)
            elif any(e.raw in ("error", "timeout") for e in evidence):
                action, value, why = "unobserved", None, "the suite could not observe it (harness error or timeout)"
            else:
                action, value, why = "agrees", declared, "the observation agrees"
            advice[name, flag] = Advice(name, flag, declared, action, value, why, evidence, backend, source, cause)
    return advice


def advise(envelopes: list[dict], sources: list[str]) -> list[Advice]:
    """Advice per (class, flag) over one or more runs of one transformers version (see the module)."""
    versions = sorted({e["environment"].get("transformers", "") for e in envelopes})
    if len(versions) > 1:
        raise AdviceError(f"run files of different transformers versions ({', '.join(versions)}); pass runs of "
                          "the one version the declarations are read from")
    per_run = [advise_one(e, s) for e, s in zip(envelopes, sources)]
    preferred = [i for i, e in enumerate(envelopes) if e["environment"].get("backend") == PREFERRED_BACKEND]
    chosen: dict[tuple[str, str], Advice] = {}
    for key in sorted({k for run in per_run for k in run}):
        order = range(len(per_run))
        if key[1] in BACKEND_FLAGS:
            order = preferred + [i for i in order if i not in preferred]
        chosen[key] = next(per_run[i][key] for i in order if key in per_run[i])
    return list(chosen.values())


def backend_note(advice: list[Advice]) -> str:
    """One line: which backend the compile advice is from (inductor where a run had it, else eager...)."""
    backends = sorted({a.backend for a in advice if a.flag in BACKEND_FLAGS})
    if not backends:
        return ""
    if backends == [PREFERRED_BACKEND]:
        return f"compile flags from the {PREFERRED_BACKEND} run (what users compile with)"
    if PREFERRED_BACKEND in backends:
        others = [b for b in backends if b != PREFERRED_BACKEND]
        count = sum(a.backend != PREFERRED_BACKEND for a in advice if a.flag in BACKEND_FLAGS)
        return (f"compile flags from the {PREFERRED_BACKEND} run, and for {count} class(es) it did not observe from "
                f"the {', '.join(others)} backend")
    return (f"compile flags from the {', '.join(backends)} backend only: no {PREFERRED_BACKEND} run was given, and "
            f"{PREFERRED_BACKEND} may fail where {', '.join(backends)} passes (pass an {PREFERRED_BACKEND} run too)")


CAUSES_SHOWN = 5


def _short(text: str, limit: int = 240) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summary_lines(advice: list[Advice], sources: list[str], where: dict[tuple[str, str], str] | None = None,
                  not_patched: dict[tuple[str, str], str] | None = None) -> list[str]:
    """The evidence per class, flag by flag: what changes (and `where` the patch changes it), what is left alone
    and why; `not_patched`: `set` advice that a patch could not apply, with the reason."""
    where, not_patched = where or {}, not_patched or {}
    lines = [f"conformance flags from {', '.join(sources)}"]
    note = backend_note(advice)
    if note:
        lines.append(note)
    lines.append("rule: True where every observing check that applies passed; False where one failed in either call "
                 "order, on a class that builds, with a failure about the flag (for the compile flag: a graph break, "
                 "data-dependent guard, unsupported construct, recompile or numerical mismatch); anything else is "
                 "left alone (docs/findings.md)")
    for flag in sorted({a.flag for a in advice}):
        items = sorted((a for a in advice if a.flag == flag), key=lambda a: a.model)
        checks = sorted({e.check for a in items for e in a.evidence})
        count = {action: sum(a.action == action for a in items) for action in ACTIONS}
        to_true = sum(a.action == "set" and a.value is True for a in items)
        lines += ["", f"{flag} (observed by {', '.join(checks)}): {count['set']} to change ({to_true} to True, "
                      f"{count['set'] - to_true} to False), {count['ambiguous']} disagreeing left alone, "
                      f"{count['agrees']} agree, {count['unobserved']} not observed (harness error or timeout)"]
        if count["unobserved"]:
            names = [a.model for a in items if a.action == "unobserved"]
            lines.append(f"  not observed: {', '.join(names)}")
        if count["undeclared"]:
            failing = sum(any(e.raw == "fail" for e in a.evidence) for a in items if a.action == "undeclared")
            lines.append(f"  {count['undeclared']} class(es) have no {flag} attribute ({failing} of them fail an "
                         "observing check): nothing to set")
        causes: dict[str, list[str]] = {}
        for a in items:
            if a.action == "set" and a.value is False and a.cause:
                causes.setdefault(a.cause, []).append(a.model)
        if causes:
            lines.append(f"  the {sum(map(len, causes.values()))} set False fail for {len(causes)} root cause(s) "
                         "(conformance findings; fixing one there is the alternative to its flags), largest first:")
            for cause, names in sorted(causes.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:CAUSES_SHOWN]:
                lines.append(f"    {len(names)} class(es): {_short(cause, 200)}")
        for a in items:
            key = (a.model, a.flag)
            evidence = _short("; ".join(e.line() for e in a.evidence))
            if a.action == "set":
                lines.append(f"  {a.declared} -> {a.value}  {a.model} [{a.backend}]: {evidence}")
                if key in where:
                    lines.append(f"      patched: {where[key]}")
                if key in not_patched:
                    lines.append(f"      not patched: {not_patched[key]}")
            elif a.action == "ambiguous":
                lines.append(f"  left alone ({a.declared})  {a.model} [{a.backend}]: {a.why}: {evidence}")
    return lines


def disagreeing(advice: list[Advice]) -> list[Advice]:
    """The advice that changes a declaration (what `conformance flags --check` fails on)."""
    return [a for a in advice if a.action == "set"]
