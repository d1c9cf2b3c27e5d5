"""Publishing a run: reports/matrix.json, MATRIX.md, matrix.html, the README's section and its picture.

Contracts (`conformance publish` and `conformance jobs publish` both publish through `publish`):

* `publish(envelope, root, merged_to=None)` writes what publishing `envelope` writes (`published_files`), after the
  envelope itself at `merged_to` where given (`jobs publish`: the job list's merged run of a version); the paths
  written, in that order.
* `publish_command(args)` is `conformance publish RUN.json [EXTRA.json ...]`: the runs merged into one
  (`run_files.merged`; one run is itself), published, each file written said, then the picture's line.

* `version_folder(envelope)` is where the run of a supported version other than the gate's is published
  (reports/<its tox env>/, a torch axis's too: `versions.of_environment`); None for the gate's version and for a
  version fixtures/versions.toml does not list.
* `published_files(envelope, root)` is what publishing writes under `root` (path -> text); a missing README is a
  `CliError`. Each page it writes carries every published version's answers (`history.published`).
* `published_picture(envelope, root)` retakes reports/matrix.png for the gate's version; one line saying what it did.
"""

from __future__ import annotations

from pathlib import Path

from conformance import versions
from conformance.report import envelope as report
from conformance.report import io, page, render
from conformance.tools.errors import CliError, write_files
from conformance.tools.run_files import merged

README = "README.md"
PUBLISHED_ENVELOPE = Path("reports/matrix.json")
PUBLISHED_MATRIX = Path("reports/MATRIX.md")
PUBLISHED_PAGE = Path("reports/matrix.html")


def version_folder(envelope: dict) -> Path | None:
    """Where the run of a supported version other than the gate's is published (reports/<its tox env>/); None
    for the gate's version (the main matrix and the README) and for a version fixtures/versions.toml does not list."""
    environment = envelope["environment"]
    version = versions.of_environment(str(environment.get("transformers", "")), str(environment.get("torch", "")))
    return None if version is None or version.is_gate else PUBLISHED_ENVELOPE.parent / version.env


def beside_path(envelope: dict) -> Path | None:
    """For the run of a torch axis, the published matrix of its transformers on the suite's own torch (relative to the
    root), which its page shows beside it; None for any other run."""
    environment = envelope["environment"]
    version = versions.of_environment(str(environment.get("transformers", "")), str(environment.get("torch", "")))
    if version is None or not version.torch:
        return None
    same = next(v for v in versions.supported() if v.minor == version.minor and not v.torch)
    return PUBLISHED_ENVELOPE if same.is_gate else PUBLISHED_ENVELOPE.parent / same.env / PUBLISHED_ENVELOPE.name


def published_files(envelope: dict, root: Path) -> dict[Path, str]:
    """What `publish` writes under `root`: the envelope copy, MATRIX.md, the HTML page and the README; for
    another supported version than the gate's, the first three in that version's folder (`version_folder`).
    The envelope is written with the cell codes its clean commits name (`cell_code.filled`), its texts naming no
    folder of the machine that ran it (`provenance.portable_texts`: a message can quote a traceback's file)."""
    from conformance.report import cell_code, provenance

    from conformance.report import history

    envelope = provenance.portable_texts(cell_code.filled(envelope, root if (root / ".git").exists() else None))
    folder = version_folder(envelope)
    cells_history = history.published(root, envelope)  # each page shows every published version's answers
    if folder is not None:
        runs, names = [envelope], [PUBLISHED_ENVELOPE.name]
        beside = beside_path(envelope)
        if beside is not None and (root / beside).exists():
            runs, names = [report.load_envelope(root / beside), envelope], [f"../{beside.relative_to(folder.parent)}",
                                                                             PUBLISHED_ENVELOPE.name]
        return {
            root / folder / PUBLISHED_ENVELOPE.name: io.json_text(envelope),
            root / folder / PUBLISHED_MATRIX.name: render.render_markdown(envelope),
            root / folder / PUBLISHED_PAGE.name: page.render_html(runs, names, cells_history),
        }
    readme = root / README
    if not readme.is_file():
        raise CliError(f"{readme}: no such file; run publish from the repository root or pass --root DIR")
    text = render.replace_section(readme.read_text(), render.readme_section(envelope), str(readme))
    return {
        root / PUBLISHED_ENVELOPE: io.json_text(envelope),
        root / PUBLISHED_MATRIX: render.render_markdown(envelope),
        root / PUBLISHED_PAGE: page.render_html([envelope], [PUBLISHED_ENVELOPE.name], cells_history),
        readme: text,
    }


def published_picture(envelope: dict, root: Path) -> str:
    """Retake reports/matrix.png (the README's picture) from the page just published, for the gate's version only
    (another version's folder has no picture); one line saying what happened, also where no browser could be driven
    (the old picture is then left as it was: `screenshot.png_beside`)."""
    if version_folder(envelope) is not None:
        return f"{root / PUBLISHED_PAGE.with_suffix('.png')} left as it was (the README shows the gate's version)"
    from conformance.report import screenshot

    return screenshot.png_beside(root / PUBLISHED_PAGE, envelope)


def publish(envelope: dict, root: Path, merged_to: Path | None = None) -> list[Path]:
    """Write `envelope`'s published files under `root`, after the envelope itself at `merged_to` where given."""
    files = published_files(envelope, root)
    if merged_to is not None:
        io.write_json_atomic(merged_to, envelope)
    write_files(files)
    return ([merged_to] if merged_to is not None else []) + list(files)


def publish_command(args) -> int:
    """`conformance publish`: one run file, or several merged into one (the main run and its extras' runs)."""
    runs = [args.run] + list(args.extra)
    envelopes = [report.load_envelope(path) for path in runs]
    envelope = envelopes[0] if len(envelopes) == 1 else merged(envelopes, runs)[0]
    written = publish(envelope, Path(args.root))
    if len(runs) > 1:
        print(f"merged {len(runs)} run files: {', '.join(runs)}")
    for path in written:
        print(f"wrote {path}")
    if args.screenshot:
        print(published_picture(envelope, Path(args.root)))
    return 0
