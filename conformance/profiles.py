"""Checkpoint profiles: rows for the official checkpoint families whose architecture differs from the class's default.

The matrix checks each class on its config class's defaults (Llava: Llama + CLIP). An official checkpoint family
may take code paths those defaults never take: another text or vision model type (Qwen2 + SigLIP), another
attention layout (sliding window, soft-capping), other feature-selection fields. A profile is such a family as
data, a ``[[profile]]`` table of ``fixtures/models/<model_type>.toml`` (the class's own fixture file)::

    [[profile]]
    name = "llava-interleave"                          # the family, lower case: [a-z0-9] then [a-z0-9.-]
    checkpoint = "llava-hf/llava-interleave-qwen-0.5b-hf"
    about = "where the facts come from (the checkpoint's config.json), in one line"
    sub_configs = { text_config = "qwen2", vision_config = "siglip_vision_model" }
    unset = ["text_config.sliding_window"]            # optional: fields the checkpoint sets to null
    [profile.config]       # the checkpoint's fields that choose code paths, dotted keys, set before shrinking
    vision_feature_select_strategy = "full"
    [profile.samples]      # optional: the sample recipe's keys that differ from the class's [samples]
    processor = { kwargs = { num_additional_image_tokens = 0 } }

The tiny config of a profile row starts from the class's default config, replaces each named sub-config by its
model type's defaults, sets the checkpoint's fields, and is then shrunk as every row's is
(`conformance.cases.tiny`). Nothing downstream knows a profile by name: it is one more row.

Row identity (`row_name`): ``<ClassName>:<profile name>``, e.g. ``LlavaForConditionalGeneration:llava-interleave``.
It is a pytest id, a ``--models`` name, an envelope ``models`` key and an expectations ``[[cell]]`` model as it is;
``:`` is in no class name and in no other name of a row, and none of pytest's, xdist's (``@``), the columns'
(``@``, ``~``) or fnmatch's (``[``) special characters is in it. `split_row` reads it back. The default row keeps
the class's name. Torch-free (the readers of run files use it).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from conformance import locations

SEPARATOR = ":"
NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
KEYS = {"name", "checkpoint", "about", "sub_configs", "unset", "config", "samples"}
REQUIRED = ("name", "checkpoint", "about")


class ProfileError(ValueError):
    """A ``[[profile]]`` table is unusable; the message is one line for a person."""


@dataclass(frozen=True)
class Profile:
    """One checkpoint family of a model type (see the module)."""

    model_type: str
    name: str
    checkpoint: str
    about: str
    sub_configs: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    config: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    unset: tuple[str, ...] = ()
    samples: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


def row_name(class_name: str, profile: str) -> str:
    """The row of `class_name` under `profile` (a profile name): ``<ClassName>:<profile>``."""
    return f"{class_name}{SEPARATOR}{profile}"


def split_row(row: str) -> tuple[str, str]:
    """(class name, profile name) of a row name; the profile is "" for a class's default row."""
    class_name, _, profile = row.partition(SEPARATOR)
    return class_name, profile


def _flatten(table: dict, prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in table.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def parse(path: Path, data: dict) -> tuple[Profile, ...]:
    """The profiles of one parsed fixture file (`data`, named `path`); ProfileError names a bad one."""
    tables = data.get("profile", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ProfileError(f"{path}: 'profile' must be an array of tables; write [[profile]]")
    found: list[Profile] = []
    for i, table in enumerate(tables):
        where = f"{path}: [[profile]] {table.get('name', f'#{i + 1}')!s}"
        unknown = set(table) - KEYS
        if unknown:
            raise ProfileError(f"{where}: unknown key {sorted(unknown)[0]!r}; allowed: {sorted(KEYS)}")
        missing = [k for k in REQUIRED if not isinstance(table.get(k), str) or not table[k].strip()]
        if missing:
            raise ProfileError(f"{where}: missing {missing[0]!r} (a non-empty string)")
        if not NAME.match(table["name"]):
            raise ProfileError(f"{where}: name {table['name']!r} must be lower case letters, digits, '.' and '-' "
                               "(it is part of the row's name)")
        if any(p.name == table["name"] for p in found):
            raise ProfileError(f"{where}: a second profile of that name; name each family once")
        subs = table.get("sub_configs", {})
        if not isinstance(subs, dict) or not all(isinstance(v, str) for v in subs.values()):
            raise ProfileError(f"{where}: 'sub_configs' must be a table of sub-config key = model type")
        unset = table.get("unset", [])
        if not isinstance(unset, list) or not all(isinstance(k, str) for k in unset):
            raise ProfileError(f"{where}: 'unset' must be a list of dotted config keys (the checkpoint's nulls)")
        for key in ("config", "samples"):
            if not isinstance(table.get(key, {}), dict):
                raise ProfileError(f"{where}: '{key}' must be a table; write [profile.{key}]")
        found.append(Profile(model_type=path.stem, name=table["name"], checkpoint=table["checkpoint"],
                             about=table["about"], sub_configs=dict(subs), config=_flatten(table.get("config", {})), unset=tuple(unset),
                             samples=dict(table.get("samples", {}))))
    return tuple(found)


@functools.lru_cache(maxsize=None)
def profiles_of(model_type: str, directory: Path | None = None) -> tuple[Profile, ...]:
    """The profiles `fixtures/models/<model_type>.toml` declares, in its order (none without the file).
    A file that is not valid TOML declares none here: the fixture's own loader names it."""
    path = (directory or locations.MODELS) / f"{model_type}.toml"
    if not path.exists():
        return ()
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return ()
    return parse(path, data)
