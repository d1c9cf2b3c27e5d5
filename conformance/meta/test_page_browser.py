"""The HTML page in a real browser (headless Chromium): rows and cells, a filter, a click on a failing cell.

Skips, saying what is missing and how to install it, where no Chromium (or
chromedriver, or the selenium package of the [dev] extra) can be found,
unless CONFORMANCE_REQUIRE_BROWSER=1 (CI sets it once it installed Chromium):
then a missing browser fails.
"""

from __future__ import annotations

import os

import pytest

from conformance.meta import browser
from conformance.meta.test_page import HOSTILE
from conformance.meta.test_report import cell, make_envelope
from conformance.report import envelope as report
from conformance.report import page

pytestmark = pytest.mark.meta

REQUIRED = os.environ.get("CONFORMANCE_REQUIRE_BROWSER") == "1"


def hostile_envelope() -> dict:
    envelope = make_envelope()
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
    assert [r.find_element("css selector", "th").text for r in rows] == ["Alpha", "Beta", "Gamma"]
    checks = make_envelope()["checks"]
    assert all(len(r.find_elements("css selector", "td.v")) == 2 * len(checks) for r in rows)
    assert [h.text for h in fresh.find_elements("css selector", "#matrix th.run")] == [
        "transformers 5.24.0", "transformers 5.23.0"]
    assert fresh.find_element("id", "shown").text == "3 of 3 classes"
    assert fresh.get_log("browser") == []  # the script ran without an error


def test_filters_hide_rows_and_columns(fresh):
    select(fresh, "modality", "image")
    assert visible_rows(fresh) == ["Alpha", "Beta"]
    assert fresh.find_element("id", "shown").text == "2 of 3 classes"
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
