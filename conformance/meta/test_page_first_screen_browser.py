"""The page's first screen in a real browser (headless Chromium) at a common laptop's window, 1366x768: the search box
and model rows in view, a search that filters, a deep link whose detail is in view, a cell's history across three
transformers versions, and no error on the console. On a fake page of three versions (a checkpoint field too) and on
the published page (reports/matrix.html, as `conformance publish` wrote it).

Skips, saying what is missing, where no Chromium can be driven, unless CONFORMANCE_REQUIRE_BROWSER=1 (as
test_page_browser.py).
"""

from __future__ import annotations

import os
import re

import pytest

from conformance import locations, versions
from conformance.meta.test_history import three_versions
from conformance.report import browser, history, page

pytestmark = pytest.mark.meta

REQUIRED = os.environ.get("CONFORMANCE_REQUIRE_BROWSER") == "1"
WIDTH, HEIGHT = 1366, 768
PUBLISHED = locations.REPOSITORY / "reports" / "matrix.html"
MIN_ROWS = 20  # model rows wholly in view on the published page's first screen


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """One browser at 1366x768 for the module; `fake` is a page of three versions, as publish renders one."""
    old, middle, new = three_versions()
    new["models"]["BetaForConditionalGeneration"]["checkpoints"] = ["acme/beta-vision-2b"]
    fake = tmp_path_factory.mktemp("page") / "matrix.html"
    fake.write_text(page.render_html([new], ["matrix.json"], history.of([old, middle, new])))
    try:
        with browser.open_page(fake, WIDTH, HEIGHT) as opened:
            opened.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # the viewport itself, not the window
                                   {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
            opened.fake = fake
            yield opened
    except browser.Missing as exc:
        if REQUIRED:
            pytest.fail(f"CONFORMANCE_REQUIRE_BROWSER=1 but {exc}", pytrace=False)
        pytest.skip(str(exc))


def show(driver, path, fragment: str = ""):
    driver.get("about:blank")
    driver.get(path.as_uri() + ("#" + fragment if fragment else ""))
    return driver


def in_view(driver, css: str) -> list[str]:
    """The text of the first cell of each element `css` that is shown and wholly inside the window."""
    return driver.execute_script("""
        return Array.from(document.querySelectorAll(arguments[0])).filter((node) => {
          const r = node.getBoundingClientRect();
          return node.offsetParent !== null && r.top >= 0 && r.bottom <= innerHeight && r.left >= 0 &&
                 r.right <= innerWidth && r.height > 0;
        }).map((node) => (node.cells ? node.cells[0] : node).textContent.trim());""", css)


def shown_rows(driver) -> list[str]:
    return driver.execute_script("return Array.from(document.querySelectorAll('#deploy tbody tr'))"
                                 ".filter((tr) => !tr.hidden).map((tr) => tr.cells[0].textContent.trim())")


def search(driver, text: str) -> None:
    box = driver.find_element("id", "f-text")
    box.clear()
    box.send_keys(text)


def severe(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def test_the_first_screen_shows_the_search_box_and_the_model_rows(driver):
    show(driver, driver.fake)
    assert in_view(driver, "#f-text") == [""]
    assert in_view(driver, "#deploy tbody tr") == ["Alpha alpha", "Beta beta", "Gamma gamma"]
    assert [th.text for th in driver.find_elements("css selector", "#deploy thead th")][1:] == ["eager", "compile"]


def test_the_published_first_screen_at_1366x768(driver):
    show(driver, PUBLISHED)
    assert in_view(driver, "#f-text") == [""]
    rows = in_view(driver, "#deploy tbody tr")
    assert len(rows) >= MIN_ROWS, rows
    paths = in_view(driver, "#deploy thead th")[1:]
    assert paths[:9] == ["eager", "compile", "static cache", "export", "ONNX", "AOTI", "ExecuTorch", "OpenVINO",
                         "exporters"]
    rest = paths[10:] if paths[9:10] == ["quantized"] else paths[9:]  # the quantized exports, once published
    assert rest in ([], ["bf16"], ["fp16"], ["bf16", "fp16"])  # the dtype runs merged into the matrix
    assert not in_view(driver, "#summary"), "the column summary belongs below the first screen"
    width = driver.execute_script("return [document.documentElement.scrollWidth, innerWidth]")
    assert width[0] <= width[1], f"the page scrolls sideways at {WIDTH}px: {width}"


def test_a_search_filters_by_name_model_type_and_checkpoint(driver):
    show(driver, driver.fake)
    search(driver, "gamm")
    assert shown_rows(driver) == ["Gamma gamma"]
    search(driver, "acme/beta")  # a checkpoint id of the row
    assert shown_rows(driver) == ["Beta beta"]
    search(driver, "ALPHA")
    assert shown_rows(driver) == ["Alpha alpha"]
    assert driver.find_element("id", "shown").text == "1 of 3 classes"
    assert driver.execute_script("return decodeURIComponent(location.hash)") == "#?q=ALPHA"


def test_a_published_search_ignores_punctuation(driver):
    show(driver, PUBLISHED)
    search(driver, "qwen2-vl")
    assert shown_rows(driver) == ["Qwen2VL qwen2_vl"]
    search(driver, "llava")
    rows = shown_rows(driver)
    assert "Llava llava" in rows and all("llava" in r.lower() for r in rows)


def test_a_deep_link_opens_the_cells_detail_in_view(driver):
    for path, fragment, row in ((driver.fake, "Alpha/compile_prefill", "Alpha alpha"),
                                (PUBLISHED, "Llava/compile_prefill", "Llava llava")):
        show(driver, path, fragment)
        detail = driver.find_element("id", "detail")
        assert detail.is_displayed()
        name = fragment.split("/")[0]
        assert f"{name}ForConditionalGeneration / compile_prefill" in detail.text
        assert in_view(driver, "#detail h3") == [f"{name}ForConditionalGeneration / compile_prefill"]
        assert row in in_view(driver, "#deploy tbody tr"), f"{fragment}: its row is not in view"
        assert in_view(driver, "#deploy td.g.selected") != []  # the path's cell is marked


def test_a_cells_history_shows_each_published_version(driver):
    show(driver, driver.fake, "Alpha/compile_prefill")
    items = in_view(driver, "#detail ol.history li")
    assert items == ["✓ transformers 4.57: works", "✓ transformers 5.23: works",
                     "✗ transformers 5.24: does not work"]
    assert in_view(driver, "#detail p.history-phrase") == ["broke in 5.24 (worked on 4.57 → 5.23)"]
    siblings = driver.find_element("css selector", "#detail ul.siblings").text
    assert "compile_decode · does not work on all published versions (4.57 → 5.24)" in siblings
    show(driver, PUBLISHED, "Llava/compile_prefill")  # every supported version's published answer
    items = in_view(driver, "#detail ol.history li")
    published = sorted({v.minor for v in versions.supported()}, key=lambda m: tuple(map(int, m.split("."))))  # a torch
    # axis (torch214) is another torch of a transformers already listed, not another version in the history
    assert [re.search(r"transformers [\d.]+", i).group(0) for i in items] == [f"transformers {v}" for v in published]
    assert len(in_view(driver, "#detail p.history-phrase")) == 1


def test_a_click_on_a_path_opens_its_cell_and_the_address_follows(driver):
    show(driver, driver.fake)
    driver.find_element("css selector", "#deploy tbody tr:nth-child(1) td.g[data-group='compile'] a").click()
    assert "AlphaForConditionalGeneration / compile_prefill" in driver.find_element("id", "detail").text
    assert driver.execute_script("return location.hash") == "#Alpha/compile_prefill"
    driver.find_element("css selector", "#deploy tbody tr:nth-child(2) th.name a").click()
    assert "What works, path by path" in driver.find_element("id", "detail").text
    assert driver.execute_script("return location.hash") == "#Beta"


def test_no_console_error_anywhere(driver):
    driver.get_log("browser")  # what earlier tests left
    for path in (driver.fake, PUBLISHED):
        for fragment in ("", "Llava/compile_prefill", "Alpha/compile_prefill", "Llava", "Alpha", "?q=x&check=build",
                         "Nope/nothing", "summary"):
            show(driver, path, fragment)
            search(driver, "a")
            for link in driver.find_elements("css selector", "#deploy tbody tr:not([hidden]) td.g a")[:3]:
                driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)  # not under the header
                link.click()
        assert severe(driver) == [], f"{path.name}: console errors"
