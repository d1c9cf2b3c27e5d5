"""Meta tests: a figure a doc cites from the published run is the published run's.

The convention (any Markdown file of docs/ and the README): a number or a
phrase taken from the published envelope (reports/matrix.json) sits between
markers that say how to compute it::

    `export_onnx` <!-- figure: cells export_onnx works -->94<!-- /figure --> pass

GitHub does not show the comments, so the text reads "94 pass". `FIGURES`
names every figure and its arguments; a marker naming another figure, a
marker left open, or a value other than the envelope's fails here, with the
value to write. A number that is a measurement of another run (a timing, a
dated observation) carries no marker and says when and where it was taken.

Figures: ``classes`` (rows), ``built`` (classes whose build cell passed),
``checks`` (columns), ``cells CHECK ANSWER`` (cells of a column by
`answer.answer`: works, broken, nocheck, na, notrun; ``applicable``: all
but na), ``pass_rate CHECK`` (`render.pass_rate`), ``env FIELD`` (the
environment's field), ``not_run CHECK`` (why the run did not run the
column), ``median_seconds CHECK`` (of the cells that apply, one decimal),
``cell_minutes CHECK...`` (their seconds summed, in minutes, rounded),
``failing`` / ``fingerprinted`` (cells whose check failed, errored or timed
out; those with a failure fingerprint), ``failing_kind CHECK KIND`` (a
column's failing cells whose fingerprint is of that kind), ``failing_at CHECK
SITE`` (those whose fingerprint's site is SITE, ``module:qualname``),
``backends_disagree CHECK...`` (classes whose answer in CHECK differs from
CHECK@inductor's, summed over the checks), ``disagreements`` (declared flags
the observation contradicts, both ways: `render.flag_disagreements`),
``flags FLAG ACTION [VALUE]`` (`flag_advice.advise` of the published run:
how many classes get that action, and value for ``set``), ``left_alone FLAG
WHY`` (of the ambiguous advice: ``call_order``, ``no_build`` or ``other``)
and ``flags_backend FLAG`` (the backend the advice is from).
"""

from __future__ import annotations

import re
import statistics

import pytest

from conformance import locations
from conformance.report import answer, flag_advice, render
from conformance.report import envelope as report
from conformance.verdicts import FAILING

pytestmark = pytest.mark.meta

MARKER = re.compile(r"<!-- figure: (?P<spec>[^>]*?) -->(?P<value>.*?)<!-- /figure -->", re.DOTALL)
OPEN, CLOSE = "<!-- figure:", "<!-- /figure -->"
DOCS = sorted((locations.REPOSITORY / "docs").glob("*.md")) + [locations.REPOSITORY / "README.md"]
WHY = {"call_order": "the failure depends on call order", "no_build": "the class does not build"}


def _column(envelope: dict, check: str) -> list[dict | None]:
    return [row["cells"].get(check) for row in envelope["models"].values()]


def _cells(envelope: dict, check: str, what: str) -> int:
    answers = [answer.answer(cell)[0] for cell in _column(envelope, check)]
    return sum(a != "na" for a in answers) if what == "applicable" else answers.count(what)


def _seconds(envelope: dict, check: str) -> list[float]:
    return [float(c.get("seconds") or 0) for c in _column(envelope, check) if c and c["verdict"] != "skip"]


def _advice(envelope: dict, flag: str) -> list[flag_advice.Advice]:
    return [a for a in flag_advice.advise([envelope], ["matrix.json"]) if a.flag == flag]


def _left_alone(envelope: dict, flag: str, why: str) -> int:
    ambiguous = [a.why for a in _advice(envelope, flag) if a.action == "ambiguous"]
    if why == "other":
        return sum(not any(w.startswith(start) for start in WHY.values()) for w in ambiguous)
    return sum(w.startswith(WHY[why]) for w in ambiguous)


def _flags(envelope: dict, flag: str, action: str, value: str = "") -> int:
    return sum(a.action == action and (not value or str(a.value) == value) for a in _advice(envelope, flag))


def _failing(envelope: dict, fingerprinted: bool) -> int:
    cells = [c for row in envelope["models"].values() for c in row["cells"].values() if c["observed"] in FAILING]
    return sum(bool(c.get("fingerprint")) for c in cells) if fingerprinted else len(cells)


def _failing_kind(envelope: dict, check: str, kind: str) -> int:
    return sum(bool(c) and c["observed"] in FAILING and (c.get("fingerprint") or {}).get("kind") == kind
               for c in _column(envelope, check))


def _failing_at(envelope: dict, check: str, site: str) -> int:
    return sum(bool(c) and c["observed"] in FAILING and (c.get("fingerprint") or {}).get("where") == site
               for c in _column(envelope, check))


def _backends_disagree(envelope: dict, *checks: str) -> int:
    def differ(row, check):
        eager, inductor = row["cells"].get(check), row["cells"].get(f"{check}@inductor")
        return bool(eager and inductor) and answer.answer(eager)[0] != answer.answer(inductor)[0]

    return sum(differ(row, check) for check in checks for row in envelope["models"].values())


FIGURES = {
    "classes": lambda e: len(e["models"]),
    "built": lambda e: sum(answer.answer(row["cells"].get("build"))[0] == "works" for row in e["models"].values()),
    "checks": lambda e: len(e["checks"]),
    "cells": _cells,
    "pass_rate": lambda e, check: render.pass_rate([c for c in _column(e, check) if c]),
    "env": lambda e, field: e["environment"].get(field, ""),
    "not_run": lambda e, check: render.not_run_columns(e).get(check, "(run)"),
    "median_seconds": lambda e, check: f"{statistics.median(_seconds(e, check)):.1f}",
    "cell_minutes": lambda e, *checks: round(sum(sum(_seconds(e, c)) for c in checks) / 60),
    "failing": lambda e: _failing(e, False),
    "fingerprinted": lambda e: _failing(e, True),
    "failing_kind": _failing_kind,
    "failing_at": _failing_at,
    "backends_disagree": _backends_disagree,
    "disagreements": lambda e: sum(map(len, render.flag_disagreements(e))),
    "flags": _flags,
    "left_alone": _left_alone,
    "flags_backend": lambda e, flag: ", ".join(sorted({a.backend for a in _advice(e, flag)})),
}


def figure(envelope: dict, spec: str) -> str:
    """The value of the figure `spec` ("name arg ...") on `envelope`; KeyError or TypeError for a bad spec."""
    name, *args = spec.split()
    return str(FIGURES[name](envelope, *args))


def contradictions(text: str, envelope: dict, source: str = "doc") -> list[str]:
    """One line per marker of `text` that is malformed or cites another value than `envelope`'s."""
    found = []
    if text.count(OPEN) != text.count(CLOSE):
        found.append(f"{source}: {text.count(OPEN)} figure marker(s) opened, {text.count(CLOSE)} closed")
    for match in MARKER.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        spec, cited = match["spec"].strip(), match["value"]
        try:
            value = figure(envelope, spec)
        except (KeyError, TypeError, ValueError, statistics.StatisticsError) as exc:
            found.append(f"{source}:{line}: figure {spec!r} cannot be computed ({type(exc).__name__}: {exc}); "
                         f"known figures: {', '.join(FIGURES)}")
            continue
        if cited != value:
            found.append(f"{source}:{line}: figure {spec!r} cites {cited!r}, the published run says {value!r}")
    return found


@pytest.fixture(scope="module")
def published() -> dict:
    return report.load_envelope(locations.PUBLISHED_MATRIX)


def test_the_docs_cite_no_figure_the_published_run_contradicts(published):
    found = [line for doc in DOCS for line in
             contradictions(doc.read_text(), published, str(doc.relative_to(locations.REPOSITORY)))]
    assert not found, "\n".join(found + ["(write the published value, or point at reports/matrix.json)"])


def test_the_docs_that_cite_the_published_run_mark_their_figures():
    marked = {doc.name for doc in DOCS if OPEN in doc.read_text()}
    assert {"findings.md", "onnx.md", "executorch.md", "speed.md", "exporters.md", "README.md"} <= marked


def test_a_contradicted_figure_is_named_with_the_value_to_write(published):
    classes = len(published["models"])
    good = f"The matrix has <!-- figure: classes -->{classes}<!-- /figure --> classes."
    assert contradictions(good, published) == []
    assert contradictions(good.replace(f"-->{classes}<", f"-->{classes + 1}<"), published) == [
        f"doc:1: figure 'classes' cites '{classes + 1}', the published run says '{classes}'"]
    assert "cannot be computed (KeyError" in contradictions("<!-- figure: nope -->1<!-- /figure -->", published)[0]
    assert contradictions("x <!-- figure: classes -->1", published)[0] == \
        "doc: 1 figure marker(s) opened, 0 closed"


def test_every_figure_computes_on_a_small_run():
    from conformance.meta.test_page import CALL_ORDER, rich_envelope

    envelope = rich_envelope()
    assert figure(envelope, "classes") == "4" and figure(envelope, "built") == "3"
    assert figure(envelope, "cells compile_prefill broken") == "3"  # Alpha fail, Beta xfail, Gamma error
    assert figure(envelope, "cells compile_prefill applicable") == "3"
    assert figure(envelope, "pass_rate build") == "75% (3/4)"
    assert figure(envelope, "env transformers") == "5.24.0"
    assert figure(envelope, "failing") == "7" and figure(envelope, "fingerprinted") == "2"
    assert figure(envelope, "flags _can_compile_fullgraph set False") == "1"  # Alpha's graph break
    assert figure(envelope, "left_alone _can_compile_fullgraph call_order") == "0"  # Beta declares False: agrees
    envelope["models"]["BetaForConditionalGeneration"]["declared"]["_can_compile_fullgraph"] = True
    assert figure(envelope, "left_alone _can_compile_fullgraph call_order") == "1"  # now it disagrees, left alone
    assert figure(envelope, "flags_backend _can_compile_fullgraph") == "eager"
    assert figure(envelope, "median_seconds build") == "0.1" and figure(envelope, "cell_minutes build") == "0"
    assert figure(envelope, "not_run build") == "(run)" and figure(envelope, "disagreements") == "2"
    assert figure(envelope, "failing_kind compile_prefill call_order") == "1"  # Beta's
    assert figure(envelope, "failing_kind compile_prefill graph_break") == "0"
    assert figure(envelope, "failing_at compile_prefill " + CALL_ORDER["where"]) == "1"  # Beta's
    assert figure(envelope, "failing_at compile_decode " + CALL_ORDER["where"]) == "0"
    assert figure(envelope, "backends_disagree compile_prefill") == "0"  # no @inductor column
    cells = envelope["models"]["AlphaForConditionalGeneration"]["cells"]
    cells["compile_prefill@inductor"] = dict(cells["build"])  # passes under inductor, fails under eager
    cells["compile_decode@inductor"] = dict(cells["compile_decode"])  # the same answer
    assert figure(envelope, "backends_disagree compile_prefill compile_decode") == "1"
    assert set(FIGURES) == {"classes", "built", "checks", "cells", "pass_rate", "env", "not_run", "median_seconds",
                            "cell_minutes", "failing", "fingerprinted", "disagreements", "flags", "left_alone",
                            "flags_backend", "failing_kind", "failing_at", "backends_disagree"}


def test_docs_name_no_machine_path_and_no_pythonpath_workaround():
    for doc in DOCS:
        text = doc.read_text()
        assert not re.search(r"(?<![\w.])/(work|home|Users)/", text), f"{doc.name} names a path of one machine"
        assert "PYTHONPATH=" not in text, f"{doc.name}: the package is installed (pip install -e .): no PYTHONPATH"
