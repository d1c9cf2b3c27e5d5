"""The supported transformers versions and what differs between them, as data: `fixtures/versions.toml`.

A shared noun (torch-free): the cases stage reads it (fixture model types,
renamed config keys), the `conformance versions` command prints it for
people and for `.ci/run`, the meta tests check it against tox, the
constraints and the installed transformers.

Contracts:

* `supported()` lists the supported versions, newest first; the newest is
  the gate's (tox env ``gate``: CI runs every class there), every other one
  is tested in CI with its meta tests and the `ci_models()` classes, in its
  own venv and against its own expectations file. Each is a tox env pinned by
  a constraints file, with its count of image-text classes.
* A `[[version]]` with a `torch` key is the torch axis of a version (issue
  57): the same transformers release on another torch than the suite's
  (`torch` is the release its constraints pin), its own tox env, job list and
  published folder, judged by the same expectations file (whose entries
  condition on `torch` where a failure differs). `key` tells it apart
  (``5.24 · torch 2.14``); `ci = false` keeps a version out of `.ci/run`
  (a CUDA build of torch is gigabytes to install).
* `installed()` is the entry of the installed transformers (matched on
  major.minor, like the expectations files) and torch (the entry whose
  `torch` has the installed torch's major.minor, else the one without
  `torch`), or None (another version, a development checkout).
  `of_environment(transformers, torch)` is the same match for a run's
  recorded versions.
* `versions_with(model_type)` is the supported versions (major.minor) that
  have a model type with a fixture that not every supported version has, or
  None when the file does not list it (every supported version has it).
* `renamed_config_keys()` maps a config key transformers renamed between
  supported versions to its other name, both ways.
* A bad file raises `VersionsError`: one line naming the file, the entry and
  the fix.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import tomllib

from conformance import locations

VERSION_KEYS = ("transformers", "env", "constraints", "image_text_classes")
OPTIONAL_KEYS = ("torch", "ci")  # a torch axis: the torch release it pins; whether .ci/run tests it (default true)
TOP_KEYS = ("version", "ci", "model_types", "renamed_config_keys")
GATE_ENV = "gate"


class VersionsError(ValueError):
    """fixtures/versions.toml is unusable; the message is one line for a person."""


@dataclass(frozen=True)
class Version:
    transformers: str  # the exact release the constraints file pins
    env: str  # its tox env
    constraints: str  # its file under constraints/
    image_text_classes: int  # discovered classes transformers maps to image-text-to-text
    torch: str = ""  # the torch release of a torch axis (its constraints pin it); "" for the suite's own torch
    ci: bool = True  # whether .ci/run tests it (`conformance versions --ci`)

    @property
    def minor(self) -> str:
        return major_minor(self.transformers)

    @property
    def key(self) -> str:
        """What tells the version apart from the others: ``5.24``, ``5.24 · torch 2.14`` for a torch axis."""
        return self.minor + (f" · torch {major_minor(self.torch)}" if self.torch else "")

    @property
    def is_gate(self) -> bool:
        return self.env == GATE_ENV


@dataclass(frozen=True)
class VersionData:
    versions: tuple[Version, ...]
    ci_models: tuple[str, ...]
    gate_ci_models: tuple[str, ...]
    model_types: dict[str, tuple[str, ...]]
    renamed: dict[str, str]


def major_minor(version: str) -> str:
    """``4.57.6`` -> ``4.57``; ``5.25.0.dev0`` -> ``5.25``."""
    return ".".join(version.split(".")[:2])


def _order(version: str) -> tuple[int, ...]:
    return tuple(int("".join(ch for ch in part if ch.isdigit()) or 0) for part in version.split(".")[:3])


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


@functools.lru_cache(maxsize=None)
def load(path: Path | None = None) -> VersionData:
    """The parsed file (default `locations.VERSIONS`); VersionsError when it is unusable."""
    path = path or locations.VERSIONS
    name = locations.shown(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise VersionsError(f"{name}: not valid TOML ({' '.join(str(exc).split())}); "
                            f"{locations.fix_or_restore(path)}") from None
    extra = sorted(set(data) - set(TOP_KEYS))
    if extra:
        raise VersionsError(f"{name}: unknown top-level key {extra[0]!r}; the file holds {', '.join(TOP_KEYS)}")
    versions = []
    for i, entry in enumerate(data.get("version", []), start=1):
        wrong = sorted((set(VERSION_KEYS) ^ set(entry)) - set(OPTIONAL_KEYS))
        if wrong:
            raise VersionsError(f"{name}: version #{i}: {wrong[0]!r} is missing or unknown; each [[version]] has "
                                f"exactly {', '.join(VERSION_KEYS)} (and may have {', '.join(OPTIONAL_KEYS)})")
        if not isinstance(entry.get("torch", ""), str) or not isinstance(entry.get("ci", True), bool):
            raise VersionsError(f"{name}: version #{i}: torch must be a release (\"2.14.1\") and ci true or false")
        versions.append(Version(**entry))
    # The suite's own torch first among the entries of one transformers release: the gate is the newest's.
    ordered = tuple(sorted(versions, key=lambda v: (_order(v.transformers), not v.torch), reverse=True))
    keys = [v.key for v in ordered]
    twice = next((key for key in keys if keys.count(key) > 1), None)
    if twice:
        raise VersionsError(f"{name}: two [[version]] entries are {twice}; give the torch axis its torch = \"...\"")
    lone = next((v for v in ordered if v.torch and not any(o.minor == v.minor and not o.torch for o in ordered)), None)
    if lone:
        raise VersionsError(f"{name}: {lone.env}: a torch axis of transformers {lone.transformers}, which has no entry "
                            "on the suite's own torch; add that entry (without torch)")
    if not ordered or not ordered[0].is_gate or sum(v.is_gate for v in ordered) != 1:
        raise VersionsError(f"{name}: the newest [[version]] must be the one with env = {GATE_ENV!r} "
                            "(the version CI tests in full), and no other")
    ci = data.get("ci", {})
    if set(ci) != {"models", "gate"} or not all(_strings(ci[k]) and ci[k] for k in ci):
        raise VersionsError(f"{name}: [ci] must hold models = [class names] (what CI runs on the other versions) "
                            "and gate = [class names] (what the README's test command gates on the gate's version)")
    minors = [v.minor for v in ordered]
    types = {}
    for model_type, listed in data.get("model_types", {}).items():
        if not (_strings(listed) and listed and all(m in minors for m in listed)):
            raise VersionsError(f"{name}: model_types.{model_type} must list the supported versions (major.minor) "
                                f"that have it, some of {minors}")
        types[model_type] = tuple(listed)
    renamed = {}
    for old, new in data.get("renamed_config_keys", {}).items():
        if not isinstance(new, str) or old == new:
            raise VersionsError(f"{name}: renamed_config_keys.{old} must be the key's other name (a string)")
        renamed[old], renamed[new] = new, old
    return VersionData(versions=ordered, ci_models=tuple(ci["models"]), gate_ci_models=tuple(ci["gate"]),
                       model_types=types, renamed=renamed)


def supported() -> tuple[Version, ...]:
    return load().versions


def ci_models() -> tuple[str, ...]:
    """The classes CI gates on every supported version but the gate's."""
    return load().ci_models


def gate_ci_models() -> tuple[str, ...]:
    """The classes the README's test command (and so CI) gates on the gate's version, `--models :ci`: the other
    versions' classes and one class of every (input strategy, model kind) of the published matrix; the whole
    matrix is the README's first command and the publishing runs."""
    return load().gate_ci_models


def installed_version() -> str:
    import transformers  # lazy: no torch

    return transformers.__version__


def installed_torch() -> str:
    """The installed torch's release, read from its metadata (no import of torch); "" where none is installed."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return ""


def of_environment(transformers_version: str, torch_version: str) -> Version | None:
    """The supported version of a run of these releases: same transformers major.minor, and the torch axis whose torch
    has the same major.minor, else the entry on the suite's own torch; None for a transformers not supported."""
    minor, torch_minor = major_minor(transformers_version), major_minor(torch_version.split("+")[0])
    same = [v for v in supported() if v.minor == minor]
    return next((v for v in same if v.torch and major_minor(v.torch) == torch_minor), None) or \
        next((v for v in same if not v.torch), None)


def installed() -> Version | None:
    """The supported version the installed transformers and torch are (`of_environment`), or None."""
    return of_environment(installed_version(), installed_torch())


def listed_model_types() -> dict[str, tuple[str, ...]]:
    return dict(load().model_types)


def versions_with(model_type: str) -> tuple[str, ...] | None:
    return load().model_types.get(model_type)


def renamed_config_keys() -> dict[str, str]:
    """A config key renamed between supported versions -> its other name (both directions)."""
    return dict(load().renamed)
