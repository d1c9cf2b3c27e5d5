"""Stage 4, report: the page's first screens as pictures, at a common laptop's window (1366x768), for people to look at
and for reports/screenshots/.

Contract: `SHOTS` names each picture and how it is taken: the page as it opens (`first-screen`), the search box
filled (`search`), a deep link to a cell (`deep-link`: its detail open) and a cell's history across the published
transformers versions (`history`: the same detail scrolled to it). `take(page, out_dir, shots=SHOTS)` writes one PNG
each into `out_dir` (palette PNGs where Pillow is installed, to keep them small) and returns their paths; it raises
`browser.Missing` where no browser can be driven. ``python -m conformance.report.page_shots PAGE.html OUT_DIR``
does the same.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

WIDTH, HEIGHT = 1366, 768
SETTLE_SECONDS = 0.3
# name -> (URL fragment, text typed into the search box, CSS selector scrolled into the detail's view)
SHOTS = {
    "first-screen": ("", "", ""),
    "search": ("", "qwen2-vl", ""),
    "deep-link": ("Llava/compile_prefill", "", ""),
    "history": ("Emu3/compile_prefill", "", ""),
}


def _small(png: bytes) -> bytes:
    try:
        from PIL import Image
    except ImportError:
        return png
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=128)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def take(page: Path, out_dir: Path, shots: dict = SHOTS) -> list[Path]:
    """One PNG per shot of `page` in `out_dir` (see the module's contract)."""
    from conformance.report import browser

    page, out_dir = Path(page).resolve(), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with browser.open_page(page, WIDTH, HEIGHT) as driver:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        for name, (fragment, typed, detail_part) in shots.items():
            driver.get("about:blank")
            driver.get(page.as_uri() + ("#" + fragment if fragment else ""))
            if typed:
                driver.find_element("id", "f-text").send_keys(typed)
            if detail_part:
                driver.execute_script("const n = document.querySelector(arguments[0]); if (n) n.scrollIntoView();",
                                      detail_part)
            time.sleep(SETTLE_SECONDS)
            path = out_dir / f"{name}.png"
            path.write_bytes(_small(driver.get_screenshot_as_png()))
            written.append(path)
    return written


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m conformance.report.page_shots PAGE.html OUT_DIR")
    for written in take(Path(sys.argv[1]), Path(sys.argv[2])):
        print(f"wrote {written}")
