"""Meta tests of the HTML page (conformance.report.page) as a file: structure, self-contained, escaped, side by side.

What the page does in a browser is tested in test_page_browser.py.
"""

from __future__ import annotations

import copy
import json
import struct
import zlib
from html import escape
from html.parser import HTMLParser

import pytest

from conformance import locations
from conformance.meta.test_cli import run, save
from conformance.meta.test_report import CHECKS, cell, make_envelope
from conformance.report import envelope as report
from conformance.report import answer, class_view, findings, flag_advice, page, render, screenshot, summary
from conformance.report.reproduce import reproducer, reproducer_template
from conformance.tools import explain

pytestmark = pytest.mark.meta

VOID = {"meta", "input", "br", "img", "link", "hr", "col", "source", "wbr", "area", "base", "embed", "track"}
HOSTILE = '</script><script>alert(1)</script><img src=x onerror="alert(2)"> & <!-- "quoted" \u2028'


class Parsed(HTMLParser):
    """Every element (tag, attributes, parent tags), the text of <script id=data>, unbalanced tags."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict, tuple[str, ...]]] = []
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.doctype = ""
        self.data_text = ""
        self.styles = ""
        self.feed(text)
        self.close()
        if self.stack:
            self.problems.append(f"unclosed: {self.stack}")

    def handle_decl(self, decl):
        self.doctype = decl

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs, tuple(self.stack)))
        if tag not in VOID:
            self.stack.append(f"{tag}#{attrs['id']}" if attrs.get("id") else tag)  # parents say `table#matrix`

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1].split("#")[0] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data):
        if self.stack[-1:] == ["script#data"]:
            self.data_text += data
        if self.stack[-1:] == ["style"]:
            self.styles += data

    def find(self, tag: str, css: str = "", inside: str = "") -> list[dict]:
        """Elements `tag` with every class of `css`, below an element `inside` (e.g. `tbody`, `table#matrix`)."""
        return [attrs for t, attrs, parents in self.elements if t == tag
                and set(css.split()) <= set((attrs.get("class") or "").split()) and (not inside or inside in parents)]

    def data(self) -> dict:
        return json.loads(self.data_text)


def body_rows(parsed: Parsed) -> list[list[dict]]:
    """The verdict cells of each row of the matrix's body, in order."""
    rows = []
    for tag, attrs, parents in parsed.elements:
        if "table#matrix" in parents and "tbody" in parents:
            if tag == "tr":
                rows.append([])
            elif tag == "td" and "v" in (attrs.get("class") or "").split():
                rows[-1].append(attrs)
    return rows


def test_the_page_is_a_whole_document_with_a_row_per_class_and_a_cell_per_check():
    envelope = make_envelope()
    parsed = Parsed(page.render_html([envelope]))
    assert parsed.doctype.lower() == "doctype html" and not parsed.problems
    assert [t for t, _, parents in parsed.elements if not parents] == ["html"]
    rows = body_rows(parsed)
    assert len(rows) == len(envelope["models"]) and all(len(r) == len(envelope["checks"]) for r in rows)
    alpha = dict(zip(envelope["checks"], rows[0]))
    assert alpha["compile_prefill"]["class"] == "v fail a-broken m-new"  # a new failure: does not work, new
    assert alpha["compile_decode"]["class"] == "v xfail a-broken m-listed"  # a known one: does not work, listed
    assert [a["data-check"] for a in parsed.find("th", "check")] == envelope["checks"]
    data = parsed.data()
    assert data["names"] == sorted(envelope["models"])
    assert data["cells"]["AlphaForConditionalGeneration"][0][1][0] == "fail"


def test_the_legend_has_every_answer_and_mark_and_the_summary_every_check():
    envelope = make_envelope()
    text = page.render_html([envelope])
    legend = text.split('<div class="legend">')[1].split("</div>")[0]
    assert all(f'<span class="v a-{a}' in legend and escape(meaning) in legend
               for a, (_, meaning) in answer.ANSWERS.items())
    assert all(escape(meaning) in legend for _, meaning in answer.MARKS.values())
    assert ">✗!<" in legend and ">✓↑<" in legend and render.KNOWN_ERROR[0] in legend
    assert render.PASS_RATE_NOTE in text
    summary_rows = Parsed(text).find("tr", inside="section#summary")
    assert len(summary_rows) == 1 + len(envelope["checks"])  # the header and a row per check
    assert "AlphaForConditionalGeneration / compile_prefill: fail: graph break" in text  # a regression, named


def test_the_page_loads_nothing_from_anywhere():
    text = page.render_html([make_envelope(), make_envelope()], ["a.json", "b.json"])
    parsed = Parsed(text)
    for tag, attrs, _ in parsed.elements:
        for name in ("src", "href", "srcset", "action", "data", "poster"):
            assert name not in attrs or not attrs[name] or not attrs[name].lstrip().startswith(("http", "//")), tag
    assert not parsed.find("link") and not parsed.find("img") and not parsed.find("iframe")
    assert all("src" not in attrs for attrs in parsed.find("script"))
    assert "url(" not in parsed.styles and "@import" not in parsed.styles
    assert "http://" not in text and "https://" not in text  # the reasons here have no links; the script builds them


def test_hostile_text_stays_text():
    envelope = make_envelope()
    alpha = envelope["models"]["AlphaForConditionalGeneration"]
    alpha["cells"]["compile_prefill"] = cell("fail", HOSTILE, note=HOSTILE)
    alpha["model_type"] = '"><script>alert(3)</script>'
    envelope["models"]['Evil<b onclick="x">ForConditionalGeneration'] = {"cells": {"build": cell("pass")}}
    envelope["summary"] = report.summarize(envelope["models"], envelope["checks"])
    text = page.render_html([envelope], ['<i>run</i>.json'])
    parsed = Parsed(text)
    assert not parsed.problems
    assert len(parsed.find("script")) == 2 and not parsed.find("img") and not parsed.find("b") and not parsed.find("i")
    assert "<script>alert" not in text and "<img" not in text and "\u2028" not in parsed.data_text
    data = parsed.data()
    assert HOSTILE in data["reasons"]
    assert data["cells"]["AlphaForConditionalGeneration"][0][1][3]["note"] == HOSTILE
    assert 'Evil<b onclick="x">ForConditionalGeneration' in data["names"]


def test_a_nan_metric_leaves_the_pages_data_strict_json():
    """A float16 cell whose logits overflowed records NaN differences: the page's data stays parseable by the
    browser's JSON.parse (no NaN token), the value written as its name."""
    envelope = make_envelope()
    name = next(iter(envelope["models"]))
    check = next(iter(envelope["models"][name]["cells"]))
    envelope["models"][name]["cells"][check]["metrics"] = {"max_abs_diff": float("nan"), "ratio": float("-inf")}
    data_text = Parsed(page.render_html([envelope])).data_text
    json.loads(data_text, parse_constant=lambda token: pytest.fail(f"{token} in the page's JSON"))
    assert '"max_abs_diff":"nan"' in data_text and '"ratio":"-inf"' in data_text


def test_several_runs_side_by_side_are_grouped_and_labelled_by_what_differs():
    new, old = make_envelope(), make_envelope()
    old["environment"]["transformers"] = "5.23.0"
    old["checks"] = ["build", "compile_prefill"]
    del old["models"]["BetaForConditionalGeneration"]
    for row in old["models"].values():
        row["cells"] = {c: v for c, v in row["cells"].items() if c in old["checks"]}
    old["summary"] = report.summarize(old["models"], old["checks"])
    parsed = Parsed(page.render_html([new, old], ["new.json", "old.json"]))
    assert not parsed.problems
    runs = parsed.find("th", "run")
    assert [r["colspan"] for r in runs] == ["4", "2"]
    assert [r["label"] for r in parsed.data()["runs"]] == ["transformers 5.24.0", "transformers 5.23.0"]
    rows = body_rows(parsed)
    assert len(rows) == 3 and all(len(r) == 6 for r in rows)
    beta = rows[1]
    assert [c["class"] for c in beta[4:]] == ["v none a-notrun"] * 2  # not in the older run: not run
    assert [a["data-check"] for a in parsed.find("th", "check")] == new["checks"] + old["checks"]
    same = Parsed(page.render_html([new, copy.deepcopy(new)], ["a.json", "b.json"])).data()
    assert [r["label"] for r in same["runs"]] == ["a.json", "b.json"]  # nothing differs: the file names


def test_the_page_is_a_pure_function_of_the_envelopes():
    envelope = make_envelope()
    before = copy.deepcopy(envelope)
    assert page.render_html([envelope]) == page.render_html([copy.deepcopy(envelope)])
    assert envelope == before


def test_the_reproducer_has_one_home():
    assert explain.reproducer is reproducer
    env = {"device": "cuda", "dtype": "bfloat16", "backend": "inductor"}
    filled = reproducer_template(env).replace("{model}", "LlavaForConditionalGeneration").replace("{check}", "build")
    assert filled == reproducer("LlavaForConditionalGeneration", "build", "cuda", "bfloat16", "inductor")
    envelope = make_envelope()
    assert Parsed(page.render_html([envelope])).data()["runs"][0]["reproducers"] == \
        {c: reproducer_template(envelope["environment"], c) for c in envelope["checks"]}
    # a column of another backend reruns its check under that backend
    assert reproducer("A", "compile_prefill@inductor", "auto", "float32", "eager") == \
        reproducer("A", "compile_prefill", "auto", "float32", "inductor")


# --------------------------------------------------------------------------- the command


def test_render_html_writes_beside_the_run_or_where_told(tmp_path, capsys):
    first, second = save(tmp_path / "new.json", make_envelope()), save(tmp_path / "old.json", make_envelope())
    code, out, _ = run(capsys, "render", "--html", first)
    assert code == 0 and out == f"wrote {tmp_path / 'new.html'}\n"
    assert (tmp_path / "new.html").read_text() == page.render_html([make_envelope()], ["new.json"])
    code, out, _ = run(capsys, "render", "--html", first, second, "-o", tmp_path / "both" / "p.html")
    assert code == 0 and (tmp_path / "both" / "p.html").read_text().count('class="run"') == 2


def test_render_several_runs_needs_html(tmp_path, capsys):
    first, second = save(tmp_path / "a.json", make_envelope()), save(tmp_path / "b.json", make_envelope())
    code, out, err = run(capsys, "render", first, second)
    assert code == 2 and err.count("\n") == 1 and "--html" in err and not out


def test_render_summary_prints_the_summary_the_run_prints(tmp_path, capsys):
    path = save(tmp_path / "matrix.json", make_envelope())
    (tmp_path / "matrix.html").write_text("")
    code, out, _ = run(capsys, "render", "--summary", path)
    assert code == 0 and out == summary.summary_text(make_envelope(), [path, tmp_path / "matrix.html"])


@pytest.mark.parametrize("folder", ["", "tf523", "tf457"])
def test_published_page_matches_published_run(folder):
    """Each published page is its run's, with the history of every published version (as publish writes it)."""
    from conformance.report import history

    published = locations.REPOSITORY / "reports" / folder / "matrix.html"
    if folder and not published.exists():
        pytest.skip(f"reports/{folder} is not published")
    envelope = report.load_envelope(published.with_suffix(".json"))
    expected = page.render_html([envelope], ["matrix.json"], history.published(locations.REPOSITORY, envelope))
    assert published.exists() and published.read_text() == expected, \
        f"{published.relative_to(locations.REPOSITORY)} is stale: rerun `conformance publish " \
        f"{published.with_suffix('.json').relative_to(locations.REPOSITORY)}`"


# --------------------------------------------------------------------------- "does it work?"

DESCRIPTIONS = {"build": "the tiny model runs its multimodal prefill, and uses its media.",
                "compile_prefill": "the multimodal prefill forward compiles with fullgraph=True.",
                "compile_decode": "decode steps compiled fullgraph over a StaticCache."}
CALL_ORDER = {"kind": "call_order", "where": "transformers.utils.output_capturing:maybe_install_capturing_hooks",
              "error": "Unsupported", "cold": "fail", "warm": "pass", "breaks": 8}
GAP = {"kind": "harness_error", "where": "transformers.utils.import_utils:requires_backends", "error": "ImportError"}
TALKER = "DeltaTalkerForConditionalGeneration"


OLDER_GAP = {"verdict": "xfail", "reason": "could not build", "expected": "error"}


def listed(verdict: str, reason: str, fingerprint: dict, expected: str = "fail", **metrics) -> dict:
    return {**cell(verdict, reason, **metrics), "expected": expected, "observed": expected, "fingerprint": fingerprint}


def rich_envelope() -> dict:
    """make_envelope() with column descriptions, a call-order failure, a known harness gap, a cell that records
    its closeness to the tolerance, and an internal sub-module (a talker: every cell but build skips)."""
    envelope = make_envelope()
    envelope["check_info"] = {c: {**info, "description": DESCRIPTIONS[c]} if c in DESCRIPTIONS else info
                              for c, info in envelope["check_info"].items()}
    beta = envelope["models"]["BetaForConditionalGeneration"]["cells"]
    beta["compile_prefill"] = listed("xfail", "call order changes the verdict: compiled before any eager call: "
                                     "fullgraph compile failed; compiled after an eager call: pass", CALL_ORDER)
    beta["build"] = cell("pass", tolerance=0.0001, worst_ratio=0.25, max_abs_diff=2.5e-5)
    gamma = envelope["models"]["GammaForConditionalGeneration"]["cells"]
    gamma["build"] = listed("xfail", "tiny model or inputs could not be built: ImportError: needs timm", GAP, "error")
    why = "not a standalone model: an internal sub-module, built only inside AlphaForConditionalGeneration"
    envelope["models"][TALKER] = {"model_type": "delta", "modalities": ["audio"], "kind": "text-to-audio",
                                  "tasks": [], "declared": {},
                                  "cells": {"build": cell("pass"), **{c: cell("skip", why) for c in CHECKS[1:]}}}
    envelope["summary"] = report.summarize(envelope["models"], envelope["checks"])
    return envelope


@pytest.mark.parametrize("recorded, expected", [
    (None, ("notrun", "")),
    (cell("pass"), ("works", "")),
    (cell("skip", "no KV cache"), ("na", "")),
    (cell("fail", "graph break"), ("broken", "new")),
    (cell("error", "could not build"), ("broken", "new")),
    (cell("timeout", "ran past 600 s"), ("broken", "new")),
    (listed("xfail", "graph break", {"kind": "graph_break"}), ("broken", "listed")),
    (listed("xfail", "could not build", GAP, "error"), ("nocheck", "gap")),  # the suite's own, listed
    (listed("xfail", "the model's own forward fails", {"kind": "exception"}, "error"), ("broken", "listed")),
    (listed("xfail", "worker crashed: no traceback", {"kind": "crash"}, "error"), ("nocheck", "gap")),  # killed
    (report.upgraded({"models": {"A": {"cells": {"c": OLDER_GAP}}}})["models"]["A"]["cells"]["c"],
     ("nocheck", "gap")),  # an older file's: no fingerprint, no observed (upgraded on read)
    ({**cell("xpass"), "observed": "pass"}, ("works", "improved")),
    ({**cell("xpass", "2 graph breaks"), "observed": "fail"}, ("broken", "improved")),  # fewer breaks: still fails
])
def test_a_cell_answers_does_it_work_with_the_gates_state_beside(recorded, expected):
    assert answer.answer(recorded) == expected
    glyph = answer.ANSWERS[expected[0]][0] + (answer.MARKS[expected[1]][0] if expected[1] else "")
    assert answer.symbol(recorded) == glyph


def test_internal_and_not_standalone_rows_are_hidden_by_default_behind_a_toggle():
    envelope = rich_envelope()
    base = {"cells": {"build": cell("skip", "no forward of its own"), "compile_prefill": cell("skip", "same")}}
    assert answer.hidden_reason("QwenPreTrainedModelForConditionalGeneration", {"cells": {}}).startswith("a base class")
    assert answer.hidden_reason("QwenForConditionalGeneration", base) == "no check applies: same"
    assert answer.hidden_reason("X", {"not_standalone": "a part", "cells": {}}) == "a part"
    alpha = "AlphaForConditionalGeneration"
    assert answer.hidden_reason(alpha, envelope["models"][alpha]) == ""
    parsed = Parsed(page.render_html([envelope]))
    rows = [attrs for t, attrs, parents in parsed.elements if t == "tr" and "tbody" in parents
            and "table#matrix" in parents]
    assert [("hidden" in r, r.get("data-internal")) for r in rows] == [(False, None)] * 2 + [(True, "1"), (False, None)]
    assert parsed.find("input", inside="form#filters")[-1]["id"] == "f-all"  # the toggle
    assert "not a standalone model" in parsed.data()["classes"][TALKER]["hidden"]
    assert "3 of 4 classes" in page.render_html([envelope])


def test_every_column_has_a_one_line_description_from_the_check_docstring():
    from conformance.checks.common import registry

    described = registry.describe(registry.check_ids())
    assert all(info.get("description") and "\n" not in info["description"] for info in described.values())
    assert described["compile_prefill"]["description"] == "the multimodal prefill forward compiles with fullgraph=True."
    envelope = rich_envelope()
    envelope["environment"]["backend"] = "eager"
    assert answer.column_description(envelope, "build") == DESCRIPTIONS["build"]
    assert answer.column_description(envelope, "compile_prefill") == \
        "the multimodal prefill forward compiles with fullgraph=True (backend eager)."  # it depends on the backend
    assert answer.column_description(envelope, "legacy_cache") == ""  # this run file has none
    envelope["not_run"] = {"compile_decode": "needs x, not installed"}
    assert answer.column_description(envelope, "compile_decode").endswith("Not run: needs x, not installed.")
    parsed = Parsed(page.render_html([envelope]))
    header = next(a for a in parsed.find("th", "check") if a["data-check"] == "build")
    assert DESCRIPTIONS["build"] in header["title"] and "Pass rate 75% (3/4)" in header["title"]
    assert parsed.data()["runs"][0]["descriptions"]["build"] == DESCRIPTIONS["build"]
    summary_text = page.summary_html(envelope)
    described = summary_text.index('<td class="desc">' + escape(DESCRIPTIONS["build"]))
    assert described < summary_text.index("compile_prefill")  # in the build row


def test_the_summary_and_the_pass_rates_come_before_the_matrix():
    text = page.render_html([rich_envelope()])
    assert text.index('<section id="summary">') < text.index('<section id="matrix-section">')
    assert page.headline(rich_envelope(), 1) == (
        "4 classes (1 internal or not standalone, hidden until you show them) × 4 columns. Of the 12 cells that "
        "apply, 5 work (41%), 6 do not (2 known, 4 new) and the suite could not check 1; 4 do not apply.")
    rates = [a for t, a, parents in Parsed(text).elements if t == "span" and a.get("class") == "rate"]
    assert len(rates) == 4


def test_a_cell_carries_its_answer_root_cause_and_closeness_to_the_tolerance():
    envelope = rich_envelope()
    envelope["models"]["BetaForConditionalGeneration"]["cells"]["legacy_cache"].update(tolerance=1e-4, worst_ratio=1.5)
    data = Parsed(page.render_html([envelope])).data()
    beta = dict(zip(envelope["checks"], data["cells"]["BetaForConditionalGeneration"][0]))
    assert beta["compile_prefill"][5:8] == ["broken", "listed", findings.cause_of(
        envelope["models"]["BetaForConditionalGeneration"]["cells"]["compile_prefill"])]
    assert beta["compile_prefill"][7].startswith("call_order-")
    assert beta["build"][3]["worst_ratio"] == 0.25 and beta["build"][8] == {}  # in its metrics
    assert beta["legacy_cache"][8] == {"tolerance": 1e-4, "worst_ratio": 1.5}  # on the cell itself
    gamma = dict(zip(envelope["checks"], data["cells"]["GammaForConditionalGeneration"][0]))
    assert gamma["build"][5:7] == ["nocheck", "gap"]
    assert body_rows(Parsed(page.render_html([envelope])))[3][0]["class"] == "v xfail a-nocheck m-gap kerr"


def test_a_class_says_in_words_what_works_on_which_path_and_what_to_do():
    envelope = rich_envelope()
    advice = flag_advice.advise_one(envelope, "run.json")
    groups = findings.group_failures([envelope])
    assert class_view.paths(envelope) == [("eager forward", ["build"]),
                                          ("torch.compile (backend eager)", ["compile_prefill", "compile_decode"]),
                                          ("generate with caches", ["legacy_cache"])]
    assert class_view.states(envelope, "AlphaForConditionalGeneration") == ["works", "broken", "works"]
    assert class_view.states(envelope, "BetaForConditionalGeneration") == ["works", "broken", "works"]
    assert class_view.states(envelope, "GammaForConditionalGeneration") == ["nocheck", "broken", "broken"]
    assert class_view.states(envelope, TALKER) == ["works", "na", "na"]
    alpha = class_view.todo(envelope, "AlphaForConditionalGeneration", "run.json", advice, groups)
    assert alpha[0].startswith("Declare _can_compile_fullgraph = False (it says True; eager backend): compile_prefill "
                               "failed (graph_break). `conformance flags run.json --patch")
    assert any(line.startswith("compile_prefill: (no fingerprint) graph break: Tensor.item()") and
               "`conformance findings run.json --group reason-" in line for line in alpha)  # ready for upstream
    beta = class_view.todo(envelope, "BetaForConditionalGeneration", "run.json", advice, groups)
    assert beta[0].startswith("compile_prefill fails when compiled before any eager call and passes after one "
                              "(call order): workaround: call the model once eagerly")
    assert any("call_order at transformers.utils.output_capturing:maybe_install_capturing_hooks" in line
               for line in beta)  # the upstream site
    gamma = class_view.todo(envelope, "GammaForConditionalGeneration", "run.json", advice, groups)
    assert any(line.startswith("The suite could not check build (its own gap, not upstream; harness_error-")
               and "needs timm" in line for line in gamma)
    talker = class_view.todo(envelope, TALKER, "run.json", advice, groups)
    assert talker == ["Not a model a user runs on its own: no check applies: not a standalone model: an internal "
                      "sub-module, built only inside AlphaForConditionalGeneration"]
    clean = make_envelope()
    clean["models"] = {"BetaForConditionalGeneration": clean["models"]["BetaForConditionalGeneration"]}
    clean["summary"] = report.summarize(clean["models"], clean["checks"])
    assert class_view.todo(clean, "BetaForConditionalGeneration", "run.json", {}, []) == [
        "Nothing to do: every check that applies works."]
    clean["models"]["ZetaForConditionalGeneration"] = {"cells": {}, "not_run": "needs timm: pip install timm"}
    assert class_view.todo(clean, "ZetaForConditionalGeneration", "run.json", {}, []) == [
        "Not run: needs timm: pip install timm"]  # a class none of whose cells ran: never "nothing to do"
    assert class_view.states(clean, "ZetaForConditionalGeneration") == ["notrun", "notrun", "notrun"]
    data = Parsed(page.render_html([envelope], ["run.json"])).data()
    assert data["classes"]["BetaForConditionalGeneration"]["views"][0]["todo"] == beta
    assert data["runs"][0]["paths"] == [list(p) for p in class_view.paths(envelope)]


# --------------------------------------------------------------------------- the picture of the page


def tiny_png() -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (screenshot.SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0\0\0\0")) + chunk(b"IEND", b""))


def test_the_picture_says_which_page_it_shows(tmp_path):
    path = tmp_path / "p.png"
    path.write_bytes(tiny_png())
    assert screenshot.source_digest(path) is None
    path.write_bytes(screenshot.with_source(tiny_png(), "ab12"))
    assert screenshot.source_digest(path) == "ab12"
    data, at, kinds = path.read_bytes(), len(screenshot.SIGNATURE), []
    while at < len(data):  # still a valid PNG: every chunk's CRC holds, the text right after the header
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        assert zlib.crc32(data[at + 4:at + 8 + length]) == struct.unpack(">I", data[at + 8 + length:at + 12 + length])[0]
        kinds.append(kind)
        at += 12 + length
    assert kinds == [b"IHDR", b"tEXt", b"IDAT", b"IEND"]


def test_the_picture_opens_the_first_cell_that_does_not_work():
    envelope = rich_envelope()
    assert screenshot.default_fragment(envelope) == "Alpha/compile_prefill"  # new failures first
    for row in envelope["models"].values():
        for check_id, recorded in row["cells"].items():
            if recorded["verdict"] in ("fail", "error"):
                row["cells"][check_id] = cell("pass")
    assert screenshot.default_fragment(envelope) == "Alpha/compile_decode"  # then known ones, in column order
    envelope["models"] = {TALKER: envelope["models"][TALKER]}
    assert screenshot.default_fragment(envelope) == ""


def test_without_a_browser_publish_leaves_the_old_picture_and_says_so(tmp_path, monkeypatch):
    from conformance.report import browser

    def missing():
        raise browser.Missing("chromedriver not found on PATH: apt-get install chromium-driver")

    monkeypatch.setattr(browser, "find", missing)
    page_path, png = tmp_path / "matrix.html", tmp_path / "matrix.png"
    page_path.write_text(page.render_html([make_envelope()]))
    png.write_bytes(b"old")
    line = screenshot.png_beside(page_path, make_envelope())
    assert line == f"{png} left as it was (no screenshot: chromedriver not found on PATH: apt-get install " \
                   "chromium-driver)"
    assert png.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["matrix.html", "matrix.png"]


def test_published_picture_was_made_from_the_published_page():
    published = locations.REPOSITORY / "reports"
    assert screenshot.source_digest(published / "matrix.png") == screenshot.page_digest(published / "matrix.html"), \
        "reports/matrix.png is stale: rerun `python -m conformance.report.screenshot reports/matrix.html`"


def test_a_browser_that_fails_leaves_the_old_picture_too(tmp_path, monkeypatch):
    pytest.importorskip("selenium")
    from selenium.common.exceptions import WebDriverException

    def fails(*args, **kwargs):
        raise WebDriverException("session not created: Chrome failed to start\nstacktrace ...")

    monkeypatch.setattr(screenshot, "screenshot", fails)
    page_path = tmp_path / "matrix.html"
    (tmp_path / "matrix.png").write_bytes(b"old")
    assert screenshot.png_beside(page_path) == (f"{tmp_path / 'matrix.png'} left as it was (no screenshot: Chromium "
                                                "failed: Message: session not created: Chrome failed to start)")
    assert (tmp_path / "matrix.png").read_bytes() == b"old"
    monkeypatch.setattr(screenshot, "screenshot", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):  # anything else is a bug, not a missing browser
        screenshot.png_beside(page_path)
