"""Per-model knowledge as data: `fixtures/models/<model_type>.toml`.

A model fixture holds what the generic rules cannot infer, never code::

    about = "why this file exists, in one line"     # required
    link = "https://..."                           # optional
    [config]            # dotted keys applied after generic shrinking
    "vision_config.image_size" = 28
    [samples]           # input recipe choices (see conformance.cases.samples)
    strategy = "patches_grid"
    [samples.processor] # strategy "processor" only (see conformance.cases.processors)
    kwargs = { num_additional_image_tokens = 1 }
    [[profile]]         # a checkpoint family's row (conformance.profiles)
    name = "llava-interleave"

Contract: `model_fixture(model_type)` returns the parsed fixture or None.
A file with an unknown key or a malformed value raises `FixtureError` with
one line naming the file, the key and the fix; `validate_all()` checks every
file. The file name is a model_type: one the installed transformers has (a
config's model_type: auto-mapped, or the config class of a discovered model),
or one that `fixtures/versions.toml` lists for other supported versions only
(valid and unused here: 5.24's apertus1p5 on 5.23). Any other name (a
misspelling) is a `FixtureError`, on every version.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from conformance import locations, profiles

MODELS_DIR = locations.MODELS

TOP_KEYS = {"about", "link", "config", "samples", "profile"}
SAMPLE_KEYS = {
    "strategy",         # name of a strategy in conformance.cases.strategies
    "image_size",       # pixel size of sample images (int or [h, w])
    "images_per_prompt",
    "image_token",      # config attribute holding the image placeholder id
    "extra_inputs",     # table of extra constant forward kwargs
    "text_length",      # prompt text tokens around the image
    "frames",           # video frames
    "audio_length",     # audio frames / samples
    "processor",        # table: how strategy "processor" builds the real processor (conformance.cases.processors)
}
PROCESSOR_KEYS = {
    "kwargs",           # table: processor __init__ kwargs ("config.<path>" names a tiny config attribute)
    "image",            # table: image/video processor attributes (same value rules)
    "tokens",           # table: special token name -> its id ("config.<path>" or an int)
    "prompt",           # text standing for one image, "{token_name}" filled in
    "image_size",       # size of the sample images before processing (int or [h, w])
}


class FixtureError(ValueError):
    """A fixture file is unusable; the message is one line for a person."""


@dataclass(frozen=True)
class ModelFixture:
    path: Path
    about: str
    link: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    samples: dict[str, Any] = field(default_factory=dict)


def _flatten(table: dict, prefix: str = "") -> dict[str, Any]:
    """TOML tables written as nested tables become dotted keys."""
    flat = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


@functools.lru_cache(maxsize=None)
def installed_model_type(model_type: str) -> bool:
    """Whether the installed transformers has `model_type`: an auto-mapped config's, or a discovered class's
    config's (4.57's Qwen2_5OmniThinkerConfig is not auto-mapped; its model_type is real)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    from conformance.discover import discover

    return model_type in CONFIG_MAPPING_NAMES or any(getattr(info.config_class, "model_type", None) == model_type
                                                     for info in discover())


def _check_name(path: Path) -> None:
    """FixtureError unless `path` is named after a model_type the installed transformers has, or one
    `fixtures/versions.toml` lists for other supported versions only."""
    from conformance import versions

    model_type = path.stem
    if installed_model_type(model_type):
        return
    listed = versions.versions_with(model_type)
    here = versions.major_minor(versions.installed_version())
    if listed is None:
        raise FixtureError(f"{path}: no model_type {model_type!r} in the installed transformers "
                           f"{versions.installed_version()}, nor listed for another supported version in "
                           f"{locations.shown(locations.VERSIONS)} [model_types]; "
                           "name the file after a config's model_type")
    if here in listed:
        raise FixtureError(f"{path}: {locations.shown(locations.VERSIONS)} lists model_type {model_type!r} for "
                           f"transformers {here}, which has no such model_type; fix model_types.{model_type}")


def load_model_fixture(path: Path, check_model_type: bool = True) -> ModelFixture:
    """Parse and validate one model fixture file."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FixtureError(f"{locations.shown(path)}: not valid TOML ({exc}); "
                           f"{locations.fix_or_restore(path)}") from None
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise FixtureError(f"{path}: unknown key {sorted(unknown)[0]!r}; allowed: {sorted(TOP_KEYS)}")
    if not isinstance(data.get("about"), str) or not data["about"].strip():
        raise FixtureError(f"{path}: missing 'about' (one line saying why this fixture exists)")
    samples = data.get("samples", {})
    bad = set(samples) - SAMPLE_KEYS
    if bad:
        raise FixtureError(f"{path}: unknown key 'samples.{sorted(bad)[0]}'; allowed: {sorted(SAMPLE_KEYS)}")
    _check_processor_table(path, samples.get("processor"))
    try:
        found = profiles.parse(path, data)
    except profiles.ProfileError as exc:
        raise FixtureError(str(exc)) from None
    for profile in found:
        bad = set(profile.samples) - SAMPLE_KEYS
        if bad:
            raise FixtureError(f"{path}: [[profile]] {profile.name}: unknown key 'samples.{sorted(bad)[0]}'; "
                               f"allowed: {sorted(SAMPLE_KEYS)}")
        _check_processor_table(path, profile.samples.get("processor"))
    if check_model_type:
        _check_name(path)
        for profile in found:
            _check_profile_types(path, profile)
    return ModelFixture(
        path=path,
        about=data["about"],
        link=data.get("link", ""),
        config=_flatten(data.get("config", {})),
        samples=dict(samples),
    )


def _check_profile_types(path: Path, profile) -> None:
    """FixtureError unless each sub-config of `profile` names a model type the installed transformers has."""
    for key, model_type in profile.sub_configs.items():
        if not installed_model_type(model_type):
            raise FixtureError(f"{path}: [[profile]] {profile.name}: sub_configs.{key} = {model_type!r} is no model "
                               "type of the installed transformers; write a config's model_type")


def _check_processor_table(path: Path, table: Any) -> None:
    if table is None:
        return
    if not isinstance(table, dict):
        raise FixtureError(f"{path}: 'samples.processor' must be a table; write [samples.processor]")
    bad = set(table) - PROCESSOR_KEYS
    if bad:
        raise FixtureError(f"{path}: unknown key 'samples.processor.{sorted(bad)[0]}'; "
                           f"allowed: {sorted(PROCESSOR_KEYS)}")
    for key in ("kwargs", "image", "tokens"):
        if not isinstance(table.get(key, {}), dict):
            raise FixtureError(f"{path}: 'samples.processor.{key}' must be a table of name = value")
    if not isinstance(table.get("prompt", ""), str):
        raise FixtureError(f"{path}: 'samples.processor.prompt' must be a string such as \"{{image_token}}\"")
    size = table.get("image_size", 1)
    if not (isinstance(size, int) or (isinstance(size, list) and len(size) == 2
                                      and all(isinstance(v, int) for v in size))):
        raise FixtureError(f"{path}: 'samples.processor.image_size' must be an int or [height, width]")


@functools.lru_cache(maxsize=None)
def model_fixture(model_type: str) -> ModelFixture | None:
    path = MODELS_DIR / f"{model_type}.toml"
    if not path.exists():
        return None
    return load_model_fixture(path)


def validate_all(directory: Path = MODELS_DIR, check_model_type: bool = True) -> list[ModelFixture]:
    """Load every model fixture; raise FixtureError on the first bad one (`check_model_type`: see the module)."""
    return [load_model_fixture(p, check_model_type) for p in sorted(directory.glob("*.toml"))]
