"""Where the suite's files live: the package data, and the published reports of a checkout.

Contract: `DATA` is the package data (`conformance/data`: model fixtures,
expectations, bench shapes, the supported versions). In a checkout it is a link to the repository's
`fixtures/`, the place a person looks and edits; an installed wheel carries
the files themselves. `require_data()` raises `DataMissing` (one line naming
the folder and the fix) when the package was installed without them.
`PUBLISHED_MATRIX` is the published run of a checkout (used for time
estimates; an installed package has none, and runs without). `shown(path)`
is a path as a person should read it: through the link (`fixtures/...`),
relative to the current directory when it lies below it.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
DATA = PACKAGE / "data"
MODELS = DATA / "models"
EXPECTATIONS = DATA / "expectations"
BENCH_SHAPES = DATA / "bench" / "shapes.json"
VERSIONS = DATA / "versions.toml"
REPOSITORY = PACKAGE.parent
PUBLISHED_MATRIX = REPOSITORY / "reports" / "matrix.json"


class DataMissing(RuntimeError):
    """The package data is not installed; the message is one line for a person."""


def require_data() -> Path:
    """`DATA`, or DataMissing when the installed package lacks its data files."""
    if not MODELS.is_dir() or not EXPECTATIONS.is_dir():
        raise DataMissing(f"{DATA}: the suite's data (models/, expectations/) is missing; reinstall the package "
                          "from a checkout or a wheel built with its package data (`pip install .`)")
    return DATA


def shown(path: Path | str) -> str:
    """`path` resolved through links, relative to the current directory when below it."""
    real = Path(path).resolve()
    try:
        return str(real.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(real)
