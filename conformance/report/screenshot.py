"""Stage 4, report: the published page as a picture (reports/matrix.png), taken by headless Chromium at publish time.

Contracts:

* `screenshot(page, out, fragment)` writes a PNG of the local HTML file
  `page` as the headless Chromium of the browser tests shows it
  (`conformance.report.browser.open_page`: nothing downloaded, the system's
  chromium and chromedriver) in a fixed window (`WIDTH` x `HEIGHT`), its
  first screen, with the URL fragment `fragment` applied (default
  `default_fragment`: the detail of the first cell that does not work, new
  failures first, else the page as it opens). It raises
  `browser.Missing` (one line: what is missing, how to install it) where no
  browser can be driven, and writes `out` atomically (nothing on failure).
  The PNG says which page it shows: a ``tEXt`` chunk `SOURCE_KEY` holds the
  SHA-256 of the page's bytes (`page_digest`), which `source_digest(png)`
  reads back (None for a PNG without it), so a meta test can tell that
  reports/matrix.png was made from reports/matrix.html as published.
* `default_fragment(envelope)` is that fragment: ``Class/check`` of the first
  class in name order (internal rows excluded) with a new failure, else a
  known one, in column order; "" for none.
* `png_beside(page, envelope)` is what publish calls: the PNG beside the
  page (matrix.html -> matrix.png), and one line saying what it did; where
  no Chromium can be driven (missing, or selenium's driver fails) the old
  PNG is left as it is and the line says why.
* ``python -m conformance.report.screenshot PAGE.html [OUT.png]`` does the
  same from the command line (the envelope read from PAGE's ``.json``
  beside it, when there is one, for the fragment).
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import time
import zlib
from pathlib import Path

from conformance.report import answer, page as page_module

WIDTH, HEIGHT = 1680, 1050
SETTLE_SECONDS = 0.3  # the script opens the fragment's detail on load; one frame is enough, this is margin
SOURCE_KEY = b"conformance-page-sha256"
SIGNATURE = b"\x89PNG\r\n\x1a\n"


def page_digest(page: Path) -> str:
    return hashlib.sha256(Path(page).read_bytes()).hexdigest()


def with_source(png: bytes, digest: str) -> bytes:
    """`png` with a tEXt chunk `SOURCE_KEY` = `digest` right after its header chunk (IHDR)."""
    if not png.startswith(SIGNATURE):
        raise ValueError("not a PNG")
    end = len(SIGNATURE) + 8 + struct.unpack(">I", png[8:12])[0] + 4  # signature, IHDR (length, type, data, crc)
    body = b"tEXt" + SOURCE_KEY + b"\0" + digest.encode("ascii")
    chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body))
    return png[:end] + chunk + png[end:]


def source_digest(png: Path) -> str | None:
    """The page digest a PNG written by `screenshot` carries; None where it has none."""
    data = Path(png).read_bytes()
    at = len(SIGNATURE)
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind == b"tEXt":
            key, _, value = data[at + 8:at + 8 + length].partition(b"\0")
            if key == SOURCE_KEY:
                return value.decode("ascii")
        if kind == b"IDAT":
            return None
        at += 12 + length
    return None


def default_fragment(envelope: dict) -> str:
    """`Class/check` of the first cell that does not work (new failures first), in a visible row; "" for none."""
    for wanted in ("new", "listed"):
        for name, row in sorted(envelope["models"].items()):
            if answer.hidden_reason(name, row):
                continue
            for check_id in envelope["checks"]:
                if answer.answer(row["cells"].get(check_id)) == ("broken", wanted):
                    return f"{page_module.short_name(name)}/{check_id}"
    return ""


def screenshot(page: Path, out: Path, fragment: str = "") -> None:
    """A PNG of `page` with `fragment` applied, in the fixed window (see the module's contract)."""
    from conformance.report import browser

    page, out = Path(page).resolve(), Path(out)
    with browser.open_page(page, WIDTH, HEIGHT) as driver:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # the viewport itself, not the window
                               {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        if fragment:
            driver.get(page.as_uri() + "#" + fragment)
        time.sleep(SETTLE_SECONDS)
        png = with_source(driver.get_screenshot_as_png(), page_digest(page))
    temporary = out.with_name(f".{out.name}.tmp")
    temporary.write_bytes(png)
    os.replace(temporary, out)


def png_beside(page: Path, envelope: dict | None = None) -> str:
    """Screenshot `page` into the .png beside it; one line saying what happened (see the module's contract)."""
    from conformance.report import browser

    out = Path(page).with_suffix(".png")
    try:
        screenshot(Path(page), out, default_fragment(envelope) if envelope else "")
    except browser.Missing as exc:
        return f"{out} left as it was (no screenshot: {exc})"
    except Exception as exc:  # selenium's WebDriverException: a browser that would not start or answer
        if type(exc).__module__.split(".")[0] != "selenium":
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        return f"{out} left as it was (no screenshot: Chromium failed: {first})"
    return f"wrote {out}"


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print("usage: python -m conformance.report.screenshot PAGE.html [OUT.png]", file=sys.stderr)
        return 2
    from conformance.report import envelope as report

    page = Path(argv[0])
    out = Path(argv[1]) if len(argv) == 2 else page.with_suffix(".png")
    run = page.with_suffix(".json")
    fragment = default_fragment(report.load_envelope(run)) if run.exists() else ""
    screenshot(page, out, fragment)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
