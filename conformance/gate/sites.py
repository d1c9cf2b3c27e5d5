"""Stage 5, gate: fingerprints recorded under an older site rule, renamed to today's (`expectations --migrate-sites`).

Until issue 57 a site depended on how the path reached `conformance.reasons.site`: dynamo prints a guard's frame
relative to torch's parent folder, so a recompile guard came out ``cache_utils:update`` where transformers sat beside
torch, ``transformers.cache_utils:update`` where it did not, and never with its class (the file was not found to
read the qualname). Today every form gives ``transformers.cache_utils:<Class>.update``.

Contracts:

* `renamed(site, location)` is today's name for a recorded ``module:qualname``. With a `location` (``path``,
  ``line``, ``function``: what a recompile's reason quotes, ``(at transformers/cache_utils.py:566 in update)``)
  it is `reasons.site` of it, provided the recorded site is a weaker form of that (its module a dotted suffix of
  today's, its qualname a dotted suffix of today's); otherwise, or when the file is not on this machine, the
  recorded site unchanged (another failure, or this machine's transformers is not the version the record was made
  with: run the migration in that version's env).
  Without a location only a bare module that is no top-level module here is qualified (`reasons.resolve` of
  ``<module>.py``, when that finds a file), the qualname kept.
* `migrate(value)` walks a recorded value (an expectations file as TOML tables, an envelope) and renames the sites
  of every fingerprint: ``guard`` (with the location of the reason beside it, or of the table holding it), ``where``
  and the keys of ``sites`` (``<what> @ <site>``). It returns the renames, (old, new) in document order, and changes
  nothing itself.
* `migrate_file(path, write)` applies them to one file, a ``.toml`` (each old string replaced in place, in order:
  the file keeps its layout) or a ``.json`` envelope (written as run files are); the renames, written back only
  when `write`.
"""

from __future__ import annotations

import importlib.util
import json
import re
import tomllib
from pathlib import Path

from conformance import reasons
from conformance.report import io

LOCATION = re.compile(r"\(at (\S+\.py):(\d+) in ([\w<>]+)\)")  # dynamo.describe_guard's location in a reason
SITED = re.compile(r"^(?P<head>.* @ )?(?P<module>[A-Za-z_][\w.]*):(?P<qualname>[\w<>.]+)$")


def _suffix(short: str, full: str) -> bool:
    return short == full or full.endswith("." + short)


def renamed(site: str, location: tuple[str, int, str] | None = None) -> str:
    """Today's name of a recorded site (see the module)."""
    found = SITED.match(site)
    if not found:
        return site
    head, module, qualname = found["head"] or "", found["module"], found["qualname"]
    if location is not None:
        if reasons.resolve(*location)[1] is None:  # transformers' file is not here: nothing to read the qualname from
            return site
        today = reasons.site(*location)
        new_module, new_qualname = today.rsplit(":", 1)
        if _suffix(module, new_module) and _suffix(qualname, new_qualname):
            return head + today
        return site
    if "." not in module and not _top_level(module):
        qualified, real = reasons.resolve(module + ".py")
        if real is not None and _suffix(module, qualified):
            return f"{head}{qualified}:{qualname}"
    return site


def _top_level(module: str) -> bool:
    """Whether `module` is a top-level module here (``torch``): a name no qualifying makes better."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _location(reason) -> tuple[str, int, str] | None:
    found = LOCATION.search(reason) if isinstance(reason, str) else None
    return (found[1], int(found[2]), found[3]) if found else None


def migrate(value, location: tuple[str, int, str] | None = None, apply: bool = False) -> list[tuple[str, str]]:
    """The renames of every fingerprint site in `value`, (old, new) in document order, made in place when `apply`
    (see the module)."""
    renames: list[tuple[str, str]] = []
    if isinstance(value, list):
        for item in value:
            renames += migrate(item, location, apply)
        return renames
    if not isinstance(value, dict):
        return renames
    location = _location(value.get("reason")) or location
    for key, item in value.items():
        if key == "fingerprint" and isinstance(item, dict):
            renames += _fingerprint(item, location, apply)
        else:
            renames += migrate(item, location, apply)
    return renames


def _fingerprint(fingerprint: dict, location, apply: bool) -> list[tuple[str, str]]:
    renames = []
    for key, item in list(fingerprint.items()):
        if key in ("guard", "where") and isinstance(item, str):
            new = renamed(item, location if key == "guard" else None)
            renames.append((item, new))
            if apply:
                fingerprint[key] = new
        elif key == "sites" and isinstance(item, dict):
            sites = {site: renamed(site) for site in item}
            renames += list(sites.items())
            if apply:
                fingerprint[key] = {sites[site]: count for site, count in item.items()}
    return [(old, new) for old, new in renames if old != new]


def migrate_file(path: Path, write: bool = False) -> list[tuple[str, str]]:
    """The renames of one expectations file or envelope, written back when `write` (see the module)."""
    path = Path(path)
    text = path.read_text()
    if path.suffix == ".toml":
        renames = migrate(tomllib.loads(text))
        out, cursor = [], 0
        for old, new in renames:
            quoted = json.dumps(old, ensure_ascii=False)  # how the file writes a string (gate.expectations._toml)
            at = text.index(quoted, cursor)
            out += [text[cursor:at], json.dumps(new, ensure_ascii=False)]
            cursor = at + len(quoted)
        result = "".join(out) + text[cursor:]
        left = migrate(tomllib.loads(result))
    else:
        data = json.loads(text)
        renames = migrate(data, apply=True)
        result = io.json_text(data)
        left = migrate(json.loads(result))
    if left:
        raise ValueError(f"{path}: sites left to rename after the migration, e.g. {left[0][0]!r}")
    if write and renames:
        io.write_text_atomic(path, result)
    return renames
