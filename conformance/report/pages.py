"""Stage 4, report: the pages a run writes beside its envelope, for a person to open.

Contract: `beside(envelope_path)` is (Markdown path, HTML path): the
envelope's name with `.md` and `.html` for `.json` in its folder
(reports/latest/matrix.json -> reports/latest/matrix.md, matrix.html).
`write_beside(envelope, envelope_path)` writes the full Markdown matrix and
the HTML page there (atomically, both or neither) and returns their paths;
it raises OSError when they cannot be written.
"""

from __future__ import annotations

from pathlib import Path

from conformance.report import io, page, render


def beside(envelope_path: str | Path) -> tuple[Path, Path]:
    path = Path(envelope_path)
    stem = path.name.removesuffix(".json")  # any other name keeps its suffix: x.md -> x.md.md, never itself
    return path.with_name(f"{stem}.md"), path.with_name(f"{stem}.html")


def write_beside(envelope: dict, envelope_path: str | Path) -> list[Path]:
    markdown, html = beside(envelope_path)
    io.write_texts_atomic({markdown: render.render_markdown(envelope),
                           html: page.render_html([envelope], [Path(envelope_path).name])})
    return [markdown, html]
