"""Meta tests: the page's first screen (conformance.report.page): the deploy paths, the search box's words, the
history it embeds, and the committed screenshots. In a browser: test_page_first_screen_browser.py."""

from __future__ import annotations

import struct

import pytest

from conformance import locations
from conformance.meta.test_history import three_versions
from conformance.meta.test_page import Parsed
from conformance.meta.test_report import cell
from conformance.report import history, page, page_shots

pytestmark = pytest.mark.meta


@pytest.mark.parametrize("column, group", [
    ("build", "eager"), ("compile_prefill", "compile"), ("compile_decode@inductor", "compile"),
    ("compile_dynamic~bf16", "bf16"), ("static_cache~fp16", "fp16"), ("static_cache", "static cache"), ("legacy_cache", ""),
    ("export_forward", "export"), ("export_generate", "export"), ("export_onnx", "ONNX"), ("onnx_generate", "ONNX"),
    ("exporter_onnx_forward", "ONNX"), ("executorch", "ExecuTorch"), ("exporter_executorch_generate", "ExecuTorch"),
    ("exporter_openvino_forward", "OpenVINO"), ("exporter_dynamo_generate", "exporters"), ("aoti_generate", "AOTI"),
    ("exporter_onnx_ort_dynamic_forward", "quantized"), ("exporter_executorch_pt2e_generate", "quantized"),
    ("exporter_openvino_nncf_openvino_weights_forward", "quantized"),
])
def test_each_column_belongs_to_its_deploy_path(column, group):
    assert page.deploy_group(column) == group


def test_the_paths_are_in_deploy_order_and_only_those_with_columns():
    checks = ["build", "legacy_cache", "exporter_openvino_forward", "build~fp16", "export_onnx", "compile_prefill",
              "static_cache~bf16", "executorch", "build~bf16", "exporter_onnx_pt2e_forward"]
    assert [(label, cols) for label, _, cols in page.deploy_groups(checks)] == [
        ("eager", ["build"]), ("compile", ["compile_prefill"]), ("ONNX", ["export_onnx"]),
        ("ExecuTorch", ["executorch"]), ("OpenVINO", ["exporter_openvino_forward"]),
        ("quantized", ["exporter_onnx_pt2e_forward"]),  # a quantized export: its own path, not ONNX's
        ("bf16", ["static_cache~bf16", "build~bf16"]), ("fp16", ["build~fp16"])]  # a dtype run: its own path


def test_the_search_matches_names_model_type_aliases_and_checkpoint_fields():
    row = {"model_type": "qwen2_vl", "aliases": ["Qwen2VLModelForConditionalGeneration"],
           "checkpoints": ["Qwen/Qwen2-VL-2B-Instruct", None], "checkpoint": "Qwen/Qwen2-VL-7B", "family": "Qwen2-VL"}
    text = page.search_text("Qwen2VLForConditionalGeneration", row)
    for word in ("qwen2vlforconditionalgeneration", "qwen2_vl", "qwen/qwen2-vl-2b-instruct", "qwen/qwen2-vl-7b",
                 "qwen2vlmodelforconditionalgeneration", "qwen2-vl"):
        assert word in text.split(), word
    assert page.search_text("LlavaForConditionalGeneration", {"model_type": "llava"}) == \
        "llavaforconditionalgeneration llava llava"


def rendered(envelopes=None, **kwargs) -> Parsed:
    old, middle, new = three_versions()
    new["models"]["AlphaForConditionalGeneration"]["checkpoints"] = ["acme/alpha-7b-instruct"]
    return Parsed(page.render_html(envelopes or [new], ["matrix.json"], history.of([old, middle, new]), **kwargs))


def test_the_first_screen_is_the_question_the_search_box_and_a_row_per_class():
    parsed = rendered()
    assert not parsed.problems
    tags = [(t, a.get("id")) for t, a, _ in parsed.elements if a.get("id") in ("f-text", "deploy", "summary")]
    assert tags == [("input", "f-text"), ("table", "deploy"), ("section", "summary")]  # the summary comes after
    rows = parsed.find("tr", inside="tbody")
    names = [a["data-name"] for a in rows if "data-name" in a]
    assert names == ["AlphaForConditionalGeneration", "BetaForConditionalGeneration", "GammaForConditionalGeneration"]
    cells = parsed.find("td", "g", inside="table#deploy")
    assert len(cells) == 3 * 2  # eager, compile (legacy_cache is in no deploy path)
    # Alpha: build works, compile_prefill fails, compile_decode xfail: compile is broken, its link the first failing
    links = parsed.find("a", inside="table#deploy")
    assert {"href": "#Alpha/compile_prefill", "data-check": "compile_prefill", "data-run": "0"} in links
    data = parsed.data()
    assert data["search"]["AlphaForConditionalGeneration"].endswith("acme/alpha-7b-instruct")
    assert data["deploy"] == {"run": 0, "groups": [["eager", ["build"]],
                                                   ["compile", ["compile_prefill", "compile_decode"]]]}


def test_the_page_embeds_each_cells_history():
    data = rendered().data()["history"]
    assert data["versions"] == ["4.57", "5.23", "5.24"]
    assert data["columns"] == ["build", "compile_prefill", "compile_decode", "legacy_cache"]
    assert data["cells"]["AlphaForConditionalGeneration"].split()[:2] == ["bww", "wwb"]
    assert data["phrases"]["wwb"] == "broke in 5.24 (worked on 4.57 → 5.23)"


def test_several_versions_rendered_together_have_their_history_and_the_newest_is_the_first_screen():
    old, middle, new = three_versions()
    parsed = Parsed(page.render_html([old, new], ["old.json", "new.json"]))
    data = parsed.data()
    assert data["history"]["versions"] == ["4.57", "5.24"] and data["deploy"]["run"] == 1
    assert page.main_run([new, old]) == 0


SCREENSHOTS = locations.REPOSITORY / "reports" / "screenshots"


@pytest.mark.parametrize("name", list(page_shots.SHOTS))
def test_the_committed_screenshots_are_at_a_laptops_window(name):
    data = (SCREENSHOTS / f"{name}.png").read_bytes()
    assert struct.unpack(">II", data[16:24]) == (page_shots.WIDTH, page_shots.HEIGHT)
    assert len(data) < 200_000, "keep the committed screenshots small (page_shots writes palette PNGs)"


def test_an_unknown_cell_still_renders():
    envelope = three_versions()[-1]
    envelope["models"]["AlphaForConditionalGeneration"]["cells"]["build"] = cell("timeout", "ran past")
    assert not rendered([envelope]).problems


def test_a_row_the_run_could_not_check_says_why_on_the_first_screen():
    old, middle, new = three_versions()
    gamma = new["models"]["GammaForConditionalGeneration"]
    gamma.update(cells={}, not_run="needs timm, not installed: pip install timm")
    parsed = rendered([new])
    why = parsed.find("td", "g why", inside="table#deploy")
    assert len(why) == 1 and why[0]["colspan"] == "2"
    assert "not run: needs timm, not installed: pip install timm" in page.render_html([new])


def test_a_path_is_marked_where_a_column_broke_or_works_in_the_newest_version():
    parsed = rendered()
    html = page.render_html([three_versions()[-1]], ["matrix.json"], history.of(three_versions()))
    assert 'title="compile: does not work; broke in 5.24: compile_prefill"' in html  # Alpha: wwb
    assert 'title="eager: works"' in html  # Alpha's build works since 5.23, not since 5.24: no mark
    assert [a for a in parsed.find("span", "chg")] == [{"class": "chg"}]
    old = three_versions()[0]  # a page of an older version than the history's newest has no marks
    older = page.render_html([old], ["matrix.json"], history.of(three_versions()))
    assert "chg" not in older.split('<table id="deploy"')[1]


def test_latest_changes():
    found = history.of(three_versions())
    assert history.latest_changes(found, "AlphaForConditionalGeneration", ["build", "compile_prefill"]) == (
        ["compile_prefill"], [])
    found["cells"]["AlphaForConditionalGeneration"]["build"] = "cbw"
    assert history.latest_changes(found, "AlphaForConditionalGeneration", ["build"]) == ([], ["build"])
    assert history.latest_changes({}, "AlphaForConditionalGeneration", ["build"]) == ([], [])
