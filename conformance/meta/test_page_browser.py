"""The HTML page in a real browser (headless Chromium): rows and cells, filters, a click on a failing cell, the deep
links of the URL fragment, the hidden internal classes, the column descriptions, a class's view.

Skips, saying what is missing and how to install it, where no Chromium (or
chromedriver, or the selenium package of the [dev] extra) can be found,
unless CONFORMANCE_REQUIRE_BROWSER=1 (CI sets it once it installed Chromium):
then a missing browser fails.
"""

from __future__ import annotations

import os
import struct

import pytest

from conformance.report import browser
from conformance.meta.test_page import DESCRIPTIONS, HOSTILE, TALKER, rich_envelope
from conformance.meta.test_report import cell, make_envelope
from conformance.report import envelope as report
from conformance.report import page

pytestmark = pytest.mark.meta

REQUIRED = os.environ.get("CONFORMANCE_REQUIRE_BROWSER") == "1"


def hostile_envelope() -> dict:
    envelope = rich_envelope()
    envelope["models"]["AlphaForConditionalGeneration"]["cells"]["legacy_cache"]["metrics"].update(
        worst_ratio=1.5, atol=1e-4, rtol=1.3e-6)
    envelope["models"]["BetaForConditionalGeneration"]["cells"]["compile_decode"] = cell(
        "fail", HOSTILE + " see https://github.com/huggingface/transformers/issues/1")
    envelope["summary"] = report.summarize(envelope["models"], envelope["checks"])
    return envelope


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """One browser for the module, showing a page of two runs (the second an older transformers)."""
    new, old = hostile_envelope(), make_envelope()
    old["environment"]["transformers"] = "5.23.0"
    path = tmp_path_factory.mktemp("page") / "matrix.html"
    path.write_text(page.render_html([new, old], ["new.json", "old.json"]))
    try:
        with browser.open_page(path) as opened:
            opened.page_path = path
            yield opened
    except browser.Missing as exc:
        if REQUIRED:
            pytest.fail(f"CONFORMANCE_REQUIRE_BROWSER=1 but {exc}", pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture
def fresh(driver):
    driver.get(driver.page_path.as_uri())
    return driver


def visible_rows(driver) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#matrix tbody tr'))"
        ".filter(tr => tr.offsetParent !== null).map(tr => tr.cells[0].textContent)")


def select(driver, name: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", f"f-{name}")).select_by_value(value)


def test_a_row_per_class_and_a_cell_per_check_of_each_run(fresh):
    rows = fresh.find_elements("css selector", "#matrix tbody tr")
    assert [r.find_element("css selector", "th").get_attribute("textContent") for r in rows] == [
        "Alpha", "Beta", "DeltaTalker", "Gamma"]
    assert visible_rows(fresh) == ["Alpha", "Beta", "Gamma"]  # the talker is internal: hidden
    checks = make_envelope()["checks"]
    assert all(len(r.find_elements("css selector", "td.v")) == 2 * len(checks) for r in rows)
    assert [h.text for h in fresh.find_elements("css selector", "#matrix th.run")] == [
        "transformers 5.24.0", "transformers 5.23.0"]
    assert fresh.find_element("id", "shown").text == "3 of 4 classes"
    assert fresh.get_log("browser") == []  # the script ran without an error


def test_filters_hide_rows_and_columns(fresh):
    select(fresh, "modality", "image")
    assert visible_rows(fresh) == ["Alpha", "Beta"]
    assert fresh.find_element("id", "shown").text == "2 of 4 classes"
    select(fresh, "verdict", "fail")
    assert visible_rows(fresh) == ["Alpha", "Beta"]  # Alpha's compile_prefill, Beta's compile_decode
    select(fresh, "check", "compile_prefill")
    assert visible_rows(fresh) == ["Alpha"]
    shown = [td for td in fresh.find_elements("css selector", "#matrix tbody tr td.v") if td.is_displayed()]
    assert len(shown) == 2  # one compile_prefill column per run
    select(fresh, "verdict", "")
    select(fresh, "check", "")
    select(fresh, "modality", "")
    fresh.find_element("id", "f-text").send_keys("gamm")
    assert visible_rows(fresh) == ["Gamma"]


def test_clicking_a_failing_cell_shows_its_reason_metrics_and_reproducer(fresh):
    assert not fresh.find_element("id", "detail").is_displayed()
    fresh.find_element("css selector", "#matrix tbody tr:nth-child(1) td.v.fail").click()
    detail = fresh.find_element("id", "detail")
    assert detail.is_displayed()
    text = detail.text
    assert "AlphaForConditionalGeneration / compile_prefill" in text
    assert "graph break: Tensor.item() (at transformers/a.py:12)" in text
    assert "graph_breaks" in text
    assert ("pytest conformance/test_matrix.py::test_compile_prefill --models AlphaForConditionalGeneration "
            "--checks compile_prefill --device cpu -p no:randomly") in text


def test_a_hostile_reason_is_shown_as_text_with_its_link(fresh):
    fresh.find_element("css selector", "#matrix tbody tr:nth-child(2) td.v.fail").click()
    reason = fresh.find_element("css selector", "#detail .reason")
    assert HOSTILE.replace("\u2028", "").split("<!--")[0] in reason.text
    assert reason.find_elements("css selector", "script, img") == []
    links = reason.find_elements("css selector", "a")
    assert [a.get_attribute("href") for a in links] == ["https://github.com/huggingface/transformers/issues/1"]


def test_sorting_by_a_check_puts_the_worst_verdicts_first(fresh):
    fresh.find_element("css selector", "#matrix th.check[data-check='compile_prefill']").click()
    assert visible_rows(fresh) == ["Alpha", "Gamma", "Beta"]  # fail, error, pass
    fresh.find_element("css selector", "#matrix th.name").click()
    assert visible_rows(fresh) == ["Alpha", "Beta", "Gamma"]


# --------------------------------------------------------------------------- deep links, internal rows, words


def open_at(driver, fragment: str):
    driver.get(driver.page_path.as_uri() + "#" + fragment)
    return driver


def hash_of(driver) -> str:
    return driver.execute_script("return decodeURIComponent(location.hash)")


def test_a_deep_link_opens_the_cell(fresh):
    for fragment in ("Alpha/compile_prefill", "alphaforconditionalgeneration/compile_prefill"):
        detail = open_at(fresh, fragment).find_element("id", "detail")
        assert detail.is_displayed(), fragment
        assert "AlphaForConditionalGeneration / compile_prefill" in detail.text
        assert "✗! does not work — new failure: not listed in the expectations" in detail.text
        assert "the multimodal prefill forward compiles with fullgraph=True (backend eager)." in detail.text
        selected = fresh.find_element("css selector", "#matrix td.v.selected")
        assert selected.find_element("xpath", "..").find_element("css selector", "th").text == "Alpha"
    open_at(fresh, "Alpha/compile_prefill/2")  # the second run's column
    assert "transformers 5.23.0" in fresh.find_element("id", "detail").text
    assert fresh.get_log("browser") == []


def test_the_address_follows_the_page_and_opens_the_filters(fresh):
    fresh.find_element("css selector", "#matrix tbody tr:nth-child(2) td.v.xfail").click()
    assert hash_of(fresh) == "#Beta/compile_prefill"
    select(fresh, "check", "compile_prefill")
    assert hash_of(fresh) == "#Beta/compile_prefill?check=compile_prefill"
    open_at(fresh, "?check=compile_prefill&verdict=fail")
    assert fresh.find_element("id", "f-check").get_attribute("value") == "compile_prefill"
    assert visible_rows(fresh) == ["Alpha"]
    assert not fresh.find_element("id", "detail").is_displayed()


def test_internal_classes_are_hidden_until_the_toggle_shows_them(fresh):
    assert TALKER.removesuffix("ForConditionalGeneration") not in visible_rows(fresh)
    fresh.find_element("id", "f-all").click()
    assert visible_rows(fresh) == ["Alpha", "Beta", "DeltaTalker", "Gamma"]
    assert fresh.find_element("id", "shown").text == "4 of 4 classes"
    fresh.find_element("id", "f-all").click()
    assert visible_rows(fresh) == ["Alpha", "Beta", "Gamma"]
    open_at(fresh, "DeltaTalker")  # a link to an internal class shows it
    assert fresh.find_element("id", "f-all").is_selected() and "DeltaTalker" in visible_rows(fresh)
    assert "Not a model a user runs on its own" in fresh.find_element("id", "detail").text


def test_the_column_description_shows_on_hover_and_in_the_summary(fresh):
    header = fresh.find_element("css selector", "#matrix th.check[data-check='build']")
    assert header.get_attribute("title").startswith("build: " + DESCRIPTIONS["build"])  # what a hover shows
    rows = fresh.find_elements("css selector", "#summary table.summary tbody tr")
    assert DESCRIPTIONS["build"] in rows[0].text and rows[0].find_element("css selector", "th").text == "build"
    assert "%" in header.find_element("css selector", ".rate").text  # the column's pass rate


def test_a_class_view_says_what_works_on_which_path_and_what_to_do(fresh):
    fresh.find_element("css selector", "#matrix tbody tr:nth-child(2) th.name a").click()
    text = fresh.find_element("id", "detail").text
    assert hash_of(fresh) == "#Beta"
    assert "What works, path by path" in text and "eager forward: works" in text
    assert "torch.compile (backend eager): does not work · compile_prefill, compile_decode (new)" in text
    assert "torch.compile (backend eager): works · works: compile_prefill · does not apply: compile_decode" in text
    assert "workaround: call the model once eagerly" in text
    assert "call_order at transformers.utils.output_capturing:maybe_install_capturing_hooks" in text
    detail = fresh.find_element("id", "detail")
    detail.find_element("link text", "compile_prefill").click()  # a path's cell opens its detail
    assert "BetaForConditionalGeneration / compile_prefill" in fresh.find_element("id", "detail").text
    assert hash_of(fresh) == "#Beta/compile_prefill"


def test_a_cell_shows_its_closeness_to_the_tolerance(fresh):
    open_at(fresh, "Beta/build")
    assert "worst difference 0.250 × the allowed one (1.0 = at the edge): within the tolerance; tolerance 0.0001" \
        in fresh.find_element("id", "detail").text
    open_at(fresh, "Alpha/legacy_cache")  # as the comparing checks record it: worst_ratio, atol, rtol
    assert "worst difference 1.50 × the allowed one (1.0 = at the edge): beyond the tolerance; allowed |difference| " \
        "<= atol 1e-4 + rtol 1.3e-6 × |expected|" in fresh.find_element("id", "detail").text


def test_the_picture_is_the_page_in_a_fixed_window(driver, tmp_path):
    from conformance.report import screenshot

    out = tmp_path / "matrix.png"
    screenshot.screenshot(driver.page_path, out, "Alpha/compile_prefill")
    data = out.read_bytes()
    assert data.startswith(screenshot.SIGNATURE)
    assert struct.unpack(">II", data[16:24]) == (screenshot.WIDTH, screenshot.HEIGHT)  # the IHDR's width, height
    assert screenshot.source_digest(out) == screenshot.page_digest(driver.page_path)
    assert [p.name for p in tmp_path.iterdir()] == ["matrix.png"]  # no temporary left behind
