"""Headless Chromium for the HTML page: the README's picture and the page's meta tests (the system's chromium and
chromedriver, via selenium).

Contract: `find()` returns (chromium, chromedriver) paths or raises `Missing`
with one line naming what is missing and how to install it; `open_page(path)`
is a context manager yielding a selenium driver showing the local file
`path`. Nothing is downloaded: selenium gets the driver's path, so it never
runs its driver manager. `python -m conformance.report.browser PAGE.html
OUT.png` takes the README's screenshot (a failing cell's detail open).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver",)
INSTALL = "apt-get install -y chromium chromium-driver (as root; Debian packages)"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars")


class Missing(RuntimeError):
    """No usable browser here; the message is one line for a person."""


def _which(names: tuple[str, ...]) -> str | None:
    return next((path for path in map(shutil.which, names) if path), None)


def find() -> tuple[str, str]:
    browser, driver = _which(BROWSERS), _which(DRIVERS)
    missing = [what for what, path in ((f"a browser ({', '.join(BROWSERS)})", browser),
                                       ("chromedriver", driver)) if path is None]
    if missing:
        raise Missing(f"{' and '.join(missing)} not found on PATH: {INSTALL}")
    return browser, driver


@contextlib.contextmanager
def open_page(path: Path, width: int = 1400, height: int = 900):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise Missing("the Python package selenium is not installed: pip install -e '.[dev]'") from None
    browser, driver_path = find()
    with tempfile.TemporaryDirectory(prefix="conformance-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = browser
        for flag in FLAGS + (f"--user-data-dir={profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
        try:
            driver.get(Path(path).resolve().as_uri())
            yield driver
        finally:
            driver.quit()


def screenshot(page: Path, out: Path, width: int = 1680, height: int = 960) -> None:
    """A PNG of `page` with the detail of its first failing (else first not passing) cell open."""
    from selenium.webdriver.common.by import By

    with open_page(page, width, height) as driver:
        for css in ("td.v.fail", "td.v.error", "td.v.timeout", "td.v.xpass", "td.v.xfail:not(.kerr)"):
            cells = driver.find_elements(By.CSS_SELECTOR, css)
            if cells:
                driver.execute_script("arguments[0].scrollIntoView({block: 'nearest'})", cells[0])
                cells[0].click()
                break
        driver.save_screenshot(str(out))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m conformance.report.browser PAGE.html OUT.png")
    screenshot(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"wrote {sys.argv[2]}")
