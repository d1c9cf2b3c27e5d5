"""Where a run came from, in names anyone can resolve: never a path of the machine that made it.

Contracts:

* `git(args, cwd)` is the output of `git ARGS` in `cwd`, "" when git or the
  repository is not there.
* `transformers_source()` says where the installed transformers came from:
  "release", ``git URL@COMMIT``, ``git DESCRIBE`` of a checkout, or
  ``archive NAME``.
* `portable(value, cwd)` is a path argument made relative to `cwd` or the
  suite's repository, else ``.../NAME``; any other value unchanged.
* `run_command(args, cwd)` is a run's command as ``pytest ARGS`` (pytest's
  invocation args) with every path `portable`, also in ``--option=PATH``
  and ``@ARGS_FILE`` forms.
* `portable_texts(value)` is a recorded value (an envelope, a cell) with every
  string's paths into the suite's checkout (``.../conformance/...``), an
  installed package or a transformers checkout written from the package on
  (`conformance.reasons.package_paths`): an exception's message can quote a
  traceback's file, and a published file names no folder of the machine
  that made it.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from conformance import locations
from conformance.reasons import package_paths

SUITE_PREFIX = re.compile(r"(?<![\w.])/[^\s\"'()]*/(?=conformance/)")  # a machine's folder before the suite's package


def git(args: list[str], cwd: Path) -> str:
    """`git ARGS` in `cwd`, its output stripped; "" when git or the repository is not there."""
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception:
        return ""


def transformers_source() -> str:
    """Where the installed transformers came from: "release" (a distribution from an index), ``git URL@COMMIT``
    (installed from a repository), ``git DESCRIBE`` (a checkout installed editable or on the path: `git describe
    --always --dirty --tags` there) or ``archive NAME`` (a wheel or sdist file)."""
    from importlib.metadata import PackageNotFoundError, distribution

    import transformers

    try:
        direct = distribution("transformers").read_text("direct_url.json")
    except PackageNotFoundError:
        direct = "{}"  # not installed: imported from a folder on the path
    if direct is None:
        return "release"
    info = json.loads(direct or "{}")
    vcs = info.get("vcs_info") or {}
    if vcs.get("commit_id"):
        return f"{vcs.get('vcs', 'git')} {info.get('url', '')}@{vcs['commit_id'][:12]}"
    if "archive_info" in info:
        return f"archive {Path(info.get('url', '')).name}"
    folder = Path(transformers.__file__).parent
    # A folder inside an environment is no checkout, even where the environment lies inside some repository.
    described = "" if "site-packages" in folder.parts else git(["describe", "--always", "--dirty", "--tags"], folder)
    return f"git {described}" if described else "a folder that is not a git checkout"


def portable(value: str, cwd: Path | str | None = None) -> str:
    """`value` if it is not an absolute path; else the path relative to `cwd` (default: the current folder) or
    to the repository when below either, else ``.../NAME``: never a folder of this machine."""
    path = Path(value)
    if not path.is_absolute():
        return value
    real = path.resolve()
    for base in (Path(cwd or Path.cwd()), locations.REPOSITORY):
        for candidate in (path, real):
            try:
                return candidate.relative_to(Path(base).resolve()).as_posix() or "."
            except ValueError:
                continue
    return f".../{path.name}"


def run_command(args, cwd) -> str:
    """``pytest ARGS``: a run's arguments (pytest's invocation args), each path `portable`, also in
    ``--option=PATH`` and ``@ARGS_FILE`` forms."""
    import shlex

    shown = []
    for arg in map(str, args):
        prefix, value = "", arg
        if arg.startswith("@"):
            prefix, value = "@", arg[1:]
        elif arg.startswith("-") and "=" in arg:
            head, _, value = arg.partition("=")
            prefix = head + "="
        shown.append(prefix + portable(value, cwd))
    return shlex.join(["pytest", *shown])


def portable_texts(value):
    """`value` with every string's machine paths written from the package on (see the module's contract)."""
    if isinstance(value, str):
        return package_paths(SUITE_PREFIX.sub("", value)) if "/" in value else value
    if isinstance(value, dict):
        return {key: portable_texts(item) for key, item in value.items()}
    if isinstance(value, list):
        return [portable_texts(item) for item in value]
    return value
