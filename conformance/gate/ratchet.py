"""Stage 5, gate: the ratchet, a cell's final verdict from its raw verdict, its fingerprint and its expectation.

Contract of `judge(raw, expectation, fingerprint)` -> `Judgement(verdict, note)`:

| raw verdict | expectation | fingerprints (`conformance.fingerprints.compare`) | final | run |
| --- | --- | --- | --- | --- |
| pass / skip | none | | pass / skip | green |
| fail / error / timeout | none | | fail / error / timeout | red |
| fail / error / timeout | listed | same | xfail | green |
| fail / error / timeout | listed | improved (fewer breaks or recompiles) | xpass, "improved: ..." | red |
| fail / error / timeout | listed | changed (another failure, or more breaks) | the raw verdict, "failure changed: ..." | red |
| fail / error / timeout | listed without a fingerprint | | the raw verdict, "listed without a fingerprint" | red |
| pass | listed | | xpass, "passes" | red |
| skip | listed | | skip | green |

So an expectation says not only *that* a cell fails but *how*: a change that
adds a second graph break to a known-failing compile, or makes an export
fail somewhere else, turns the cell red; an improvement does too until the
expectation is tightened. An entry without a fingerprint (written by hand,
or by an older suite) never widens what the gate accepts: it accepts
nothing until `conformance expectations --update RUN.json` records one.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.fingerprints import Fingerprint, compare
from conformance.verdicts import FAILING

ACCEPT = "if intended, accept it with `conformance expectations --update RUN.json`"
UPDATE = "tighten the expectation with `conformance expectations --update RUN.json`"


@dataclass(frozen=True)
class Judgement:
    verdict: str
    note: str = ""  # why a listed cell is not xfail, for the cell's report line


def judge(raw: str, expectation, fingerprint: Fingerprint | None = None) -> Judgement:
    if expectation is None:
        return Judgement(raw)
    if raw == "pass":
        return Judgement("xpass", "passes although listed as failing; remove the expectation")
    if raw not in FAILING:
        return Judgement(raw)
    comparison = compare(expectation.fingerprint, fingerprint)
    if comparison.status == "same":
        return Judgement("xfail")
    if comparison.status == "improved":
        return Judgement("xpass", f"{comparison.message}; {UPDATE}")
    if comparison.status == "unlisted":
        return Judgement(raw, "listed without a fingerprint, so the expectation accepts no failure; record one "
                              "with `conformance expectations --update RUN.json`")
    return Judgement(raw, f"{comparison.message}; {ACCEPT}")
