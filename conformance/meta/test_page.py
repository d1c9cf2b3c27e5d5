"""Meta tests of the HTML page (conformance.report.page) as a file: structure, self-contained, escaped, side by side.

What the page does in a browser is tested in test_page_browser.py.
"""

from __future__ import annotations

import copy
import json
from html.parser import HTMLParser

import pytest

from conformance import locations
from conformance.meta.test_cli import run, save
from conformance.meta.test_report import cell, make_envelope
from conformance.report import envelope as report
from conformance.report import page, render, summary
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
    assert alpha["compile_prefill"]["class"] == "v fail" and alpha["compile_decode"]["class"] == "v xfail"
    assert [a["data-check"] for a in parsed.find("th", "check")] == envelope["checks"]
    data = parsed.data()
    assert data["names"] == sorted(envelope["models"])
    assert data["cells"]["AlphaForConditionalGeneration"][0][1][0] == "fail"


def test_the_legend_has_every_symbol_and_the_summary_every_check():
    envelope = make_envelope()
    text = page.render_html([envelope])
    assert all(f'class="v {v}">{symbol}<' in text for v, symbol in render.SYMBOLS.items())
    assert render.KNOWN_ERROR[0] in text and render.PASS_RATE_NOTE in text
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
    assert [c["class"] for c in beta[4:]] == ["v none", "v none"]  # not in the older run: not run
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


def test_published_page_matches_published_run():
    published = locations.REPOSITORY / "reports" / "matrix.html"
    envelope = report.load_envelope(locations.PUBLISHED_MATRIX)
    assert published.exists() and published.read_text() == page.render_html([envelope], ["matrix.json"]), \
        "reports/matrix.html is stale: rerun `conformance publish reports/matrix.json`"
