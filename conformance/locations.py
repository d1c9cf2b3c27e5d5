"""Where the suite's files live: the package data, and the published reports of a checkout.

Contract: `DATA` is the package data (`conformance/data`: model fixtures,
expectations, bench shapes, the supported versions). In a checkout it is a link to the repository's
`fixtures/`, the place a person looks and edits; an installed wheel carries
the files themselves. `require_data()` raises `DataMissing` (one line naming
the folder and the fix) when the package was installed without them.
`PUBLISHED_MATRIX` is the published run of a checkout (used for time
estimates; an installed package has none, and runs without). `shown(path)`
is a path as a person should read it: through the link (`fixtures/...`),
relative to the current directory when it lies below it. `restore_command(path)`
is the git command that puts back a file's committed version (in a checkout,
for a file git tracks), else None: a hint names it only where it works.
"""

from __future__ import annotations

import shlex
import subprocess
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


def _git(args: list[str], folder: Path) -> str | None:
    """git's stdout in `folder`, None where git is missing or says no."""
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def restore_command(path: Path | str) -> str | None:
    """`git checkout -- PATH` (with `-C ROOT` when the current directory is outside the checkout) for a file git
    tracks, else None (no checkout, an installed package, a file never committed)."""
    real = Path(path).resolve()
    if _git(["ls-files", "--error-unmatch", "--", real.name], real.parent) is None:
        return None
    root = _git(["rev-parse", "--show-toplevel"], real.parent)
    if root is None:
        return None
    root_path = Path(root).resolve()
    if Path.cwd().resolve().is_relative_to(root_path):
        return f"git checkout -- {shlex.quote(shown(real))}"
    return f"git -C {shlex.quote(str(root_path))} checkout -- {shlex.quote(str(real.relative_to(root_path)))}"


def fix_or_restore(path: Path | str) -> str:
    """The fix a hint for a damaged data file names: by hand, or its committed version where there is one."""
    command = restore_command(path)
    return f"fix it by hand, or restore the committed file with `{command}`" if command else "fix it by hand"
