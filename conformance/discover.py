"""Stage 1, discover: one `ModelInfo` per `*ForConditionalGeneration` class.

Contract: `discover()` lists every class whose name ends in
``ForConditionalGeneration`` that the installed ``transformers`` exports at
top level, sorted by name, nothing hard-coded. A class that is only a
deprecated alias of another exported class (the same object under two names)
is one row, the alias recorded in ``aliases``. Discovery never imports a
model's weights and never fails because of one class: a class whose config
cannot be resolved still gets a row (``config_class`` None) so that the
build stage can report it as an ``error`` with a reason.

Profile rows: after a standalone class's row (its config class's defaults) come its
checkpoint profiles' rows (`conformance.profiles`: ``<ClassName>:<profile>``,
declared in ``fixtures/models/<model_type>.toml``), each a `ModelInfo` of the
same class whose `profile` is set and whose `kind` follows the profile's
sub-configs (a Flan-T5 text model makes BLIP-2 encoder-decoder).

Row kind: `not_standalone(cls, names)` says whether a class is a model a user
runs on its own, from the class and the installed transformers alone, by two
general rules (never a list of names):

1. **No forward of its own.** The class's `forward` is ``torch.nn.Module``'s
   unimplemented stub: there is nothing for a check to call. Either it is a
   shared base class (in no auto mapping: its subclasses are the models), or
   a composite that runs only through its own ``generate()`` over the
   sub-models it builds (those have rows of their own).
2. **A part of another class only.** The class is in no auto mapping (no
   ``AutoModel*`` class resolves a checkpoint to it) and another class of its
   own modeling module constructs it (``Name(`` or ``Name._from_config(`` in
   that class's source): an internal sub-module (a talker, its code
   predictor, a text-to-unit head) that only its parent runs.

It returns "" for a standalone model, else the row's reason, recorded in
``ModelInfo.not_standalone``; the cases stage then skips every cell of the
row with it (its ``build`` cell still says whether the class can be built).
A class in an auto mapping with a forward of its own is always standalone.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from conformance.profiles import row_name, split_row

SUFFIX = "ForConditionalGeneration"

# Capability attributes of PreTrainedModel that say what a class claims to
# support. Recorded as declared flags; they never gate a check.
FLAG_PREFIXES = ("_can_compile", "_supports_", "_is_stateful")

# transformers.models.auto mapping -> (task name, modalities it implies)
TASK_MAPPINGS = {
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES": ("image-text-to-text", ("image", "text")),
    "MODEL_FOR_VISION_2_SEQ_MAPPING_NAMES": ("image-to-text", ("image", "text")),
    "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES": ("multimodal-lm", ("text",)),
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES": ("speech-to-text", ("audio", "text")),
    "MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES": ("text-to-audio", ("text",)),
    "MODEL_FOR_TEXT_TO_SPECTROGRAM_MAPPING_NAMES": ("text-to-audio", ("text",)),
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES": ("text2text", ("text",)),
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES": ("text-generation", ("text",)),
}


@dataclass(frozen=True)
class ModelInfo:
    """What the suite knows about one class before building anything."""

    name: str
    model_class: type
    config_class: type | None
    model_type: str
    module: str
    modalities: tuple[str, ...]
    tasks: tuple[str, ...]
    kind: str
    declared: dict[str, Any] = field(hash=False, compare=False)
    aliases: tuple[str, ...] = ()
    not_standalone: str = ""  # why the class is not a model a user runs on its own ("" when it is one)
    profile: Any = field(default=None, hash=False, compare=False)  # a profiles.Profile on a profile row, else None

    @property
    def class_name(self) -> str:
        """The class's own name: the row's name without its profile."""
        return split_row(self.name)[0]

    @property
    def is_image_text(self) -> bool:
        return "image-text-to-text" in self.tasks

    @property
    def family(self) -> str:
        """The `transformers.models.<family>` package the class lives in."""
        parts = self.module.split(".")
        return parts[2] if len(parts) > 2 and parts[1] == "models" else self.model_type


def _task_index() -> dict[str, list[str]]:
    """class name -> task names, from transformers' auto mappings."""
    from transformers.models.auto import modeling_auto

    index: dict[str, list[str]] = {}
    for attr, (task, _) in TASK_MAPPINGS.items():
        for value in getattr(modeling_auto, attr, {}).values():
            for cls_name in value if isinstance(value, (list, tuple)) else (value,):
                index.setdefault(cls_name, [])
                if task not in index[cls_name]:
                    index[cls_name].append(task)
    return index


def declared_flags(cls: type) -> dict[str, Any]:
    """The capability attributes the class declares (plain bool/str values)."""
    flags = {}
    for attr in sorted(dir(cls)):
        if attr.startswith(FLAG_PREFIXES):
            value = getattr(cls, attr, None)
            if isinstance(value, (bool, str, int)) or value is None:
                flags[attr] = value
    return flags


def _modalities(cls: type, tasks: list[str]) -> tuple[str, ...]:
    declared = getattr(cls, "input_modalities", None)
    found = set()
    if isinstance(declared, str):
        found.add(declared)
    elif declared:
        found.update(declared)
    for attr, (task, mods) in TASK_MAPPINGS.items():
        if task in tasks:
            found.update(mods)
    if not found:
        found.add("text")
    order = ("image", "video", "audio", "text")
    return tuple(m for m in order if m in found) + tuple(sorted(found - set(order)))


def _kind(cls: type, config_class: type | None, modalities: tuple[str, ...], tasks: list[str]) -> str:
    is_enc_dec = bool(config_class is not None and getattr(config_class, "is_encoder_decoder", False))
    if config_class is not None and not is_enc_dec:
        try:
            is_enc_dec = bool(config_class().is_encoder_decoder)
        except Exception:
            pass
    if "text-to-audio" in tasks:
        return "text-to-audio"
    if "image" in modalities or "video" in modalities:
        return "multimodal-encoder-decoder" if is_enc_dec else "multimodal-decoder-only"
    if "audio" in modalities:
        return "speech-encoder-decoder" if is_enc_dec else "speech-decoder-only"
    return "text-encoder-decoder" if is_enc_dec else "text-decoder-only"


def _model_type(config_class: type | None, cls: type) -> str:
    model_type = getattr(config_class, "model_type", "") if config_class else ""
    return model_type or cls.__module__.split(".")[-1].removeprefix("modeling_")


@contextlib.contextmanager
def quiet_transformers():
    """Silence transformers' config warnings (discovery instantiates every config class with its defaults)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


@functools.lru_cache(maxsize=1)
def discover() -> tuple[ModelInfo, ...]:
    """Every `*ForConditionalGeneration` class of the installed transformers."""
    with quiet_transformers():
        return _discover()


def _discover() -> tuple[ModelInfo, ...]:
    import transformers

    tasks_by_class = _task_index()
    by_object: dict[int, list[str]] = {}
    classes: dict[str, type] = {}
    for name in sorted(n for n in dir(transformers) if n.endswith(SUFFIX)):
        try:
            cls = getattr(transformers, name)
        except Exception:  # a lazy import that fails is still a row
            cls = None
        # Dummy objects stand in for classes of a framework that is not installed
        # (Flax/TF in 4.x); they are not models of this installation.
        if not inspect.isclass(cls) or type(cls).__name__ == "DummyObject":
            continue
        if not issubclass(cls, transformers.PreTrainedModel):  # 4.x TF/Flax twins
            continue
        classes[name] = cls
        by_object.setdefault(id(cls), []).append(name)

    infos = []
    for names in by_object.values():
        cls = classes[names[0]]
        # The canonical name is the class's own __name__; the others are aliases.
        canonical = cls.__name__ if cls.__name__ in names else names[0]
        aliases = tuple(n for n in names if n != canonical)
        try:
            config_class = getattr(cls, "config_class", None)
        except ImportError:  # a backend the class needs is missing
            config_class = None
        if not inspect.isclass(config_class):
            config_class = None
        tasks = [t for n in names for t in tasks_by_class.get(n, [])]
        modalities = _modalities(cls, tasks)
        infos.append(
            ModelInfo(
                name=canonical,
                model_class=cls,
                config_class=config_class,
                model_type=_model_type(config_class, cls),
                module=cls.__module__,
                modalities=modalities,
                tasks=tuple(dict.fromkeys(tasks)),
                kind=_kind(cls, config_class, modalities, tasks),
                declared=declared_flags(cls),
                aliases=aliases,
                not_standalone=not_standalone(cls, tuple(names)),
            )
        )
    return tuple(row for info in sorted(infos, key=lambda i: i.name) for row in (info, *profile_rows(info)))


def profile_rows(info: ModelInfo) -> list[ModelInfo]:
    """The rows of `info`'s checkpoint profiles (`conformance.profiles`), none for a class that is not standalone."""
    import dataclasses

    from conformance.profiles import profiles_of

    if info.not_standalone or info.config_class is None:
        return []
    return [dataclasses.replace(info, name=row_name(info.name, p.name), aliases=(), profile=p,
                                kind=_profile_kind(info, p))
            for p in sorted(profiles_of(info.model_type), key=lambda p: p.name)]


def _profile_kind(info: ModelInfo, profile) -> str:
    """`info.kind`, encoder-decoder when one of the profile's sub-configs is (BLIP-2's Flan-T5)."""
    from transformers import CONFIG_MAPPING

    try:
        enc_dec = any(CONFIG_MAPPING[t]().is_encoder_decoder for t in profile.sub_configs.values())
    except Exception:  # an unknown model type: the tiny config says so when the row is built
        return info.kind
    return info.kind.replace("decoder-only", "encoder-decoder") if enc_dec else info.kind


# --------------------------------------------------------------------------- row kind: standalone or not

NO_FORWARD = "no forward of its own (its forward is torch.nn.Module's unimplemented stub)"


@functools.lru_cache(maxsize=1)
def auto_mapped_names() -> frozenset[str]:
    """Every class name any ``MODEL_*_MAPPING_NAMES`` of transformers' auto API resolves to."""
    from transformers.models.auto import modeling_auto

    names: set[str] = set()
    for attr in dir(modeling_auto):
        if attr.startswith("MODEL_") and attr.endswith("_MAPPING_NAMES"):
            for value in getattr(modeling_auto, attr).values():
                names.update(value if isinstance(value, (list, tuple)) else (value,))
    return frozenset(names)


def has_own_forward(cls: type) -> bool:
    """Whether some class in `cls`'s hierarchy below nn.Module defines forward."""
    import torch

    return getattr(cls, "forward", None) is not torch.nn.Module.forward


@functools.lru_cache(maxsize=None)
def _class_sources(module_name: str) -> dict[str, str]:
    """Top-level class name -> its source text, for one module (its file read once)."""
    module = sys.modules.get(module_name)
    try:
        text = inspect.getsource(module) if module is not None else ""
    except (OSError, TypeError):
        return {}
    sources: dict[str, str] = {}
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"^class (\w+)\b", text, re.MULTILINE)]
    ends = [m.start() for m in re.finditer(r"^\S", text, re.MULTILINE)]
    for start, name in starts:
        end = next((e for e in ends if e > start), len(text))
        sources[name] = text[start:end]
    return sources


def _module_classes(cls: type) -> list[type]:
    """The nn.Module classes defined in `cls`'s own module, `cls` excluded."""
    import torch

    module = sys.modules.get(cls.__module__)
    if module is None:
        return []
    return [obj for obj in vars(module).values()
            if inspect.isclass(obj) and obj is not cls and obj.__module__ == cls.__module__
            and issubclass(obj, torch.nn.Module)]


def _constructs(owner: type, name: str) -> bool:
    source = _class_sources(owner.__module__).get(owner.__name__, "")
    return re.search(rf"\b{re.escape(name)}(\._from_config)?\(", source) is not None


def _exported(name: str) -> bool:
    """Whether transformers exports `name` at top level with our suffix (a class with a row of its own)."""
    import transformers

    return name.endswith(SUFFIX) and hasattr(transformers, name)


def builders_of(cls: type) -> list[str]:
    """Classes of `cls`'s module whose source constructs `cls` (sorted names)."""
    return sorted(other.__name__ for other in _module_classes(cls) if _constructs(other, cls.__name__))


def parts_of(cls: type) -> list[str]:
    """Exported `*ForConditionalGeneration` classes of `cls`'s module that `cls` constructs."""
    return sorted(other.__name__ for other in _module_classes(cls)
                  if _exported(other.__name__) and _constructs(cls, other.__name__) and not issubclass(cls, other))


def subclasses_of(cls: type) -> list[str]:
    """Exported `*ForConditionalGeneration` classes of `cls`'s module that subclass it with a forward of their own."""
    return sorted(other.__name__ for other in _module_classes(cls)
                  if issubclass(other, cls) and has_own_forward(other) and _exported(other.__name__))


def _names(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def not_standalone(cls: type, names: tuple[str, ...] = ()) -> str:
    """"" when `cls` (exported under `names`, default its own) is a model a user runs on its own,
    else the reason its row's checks do not apply (the rules in the module docstring)."""
    names = names or (cls.__name__,)
    mapped = any(n in auto_mapped_names() for n in names)
    if not has_own_forward(cls):
        if mapped:
            parts = parts_of(cls)
            rows = f" ({_names(parts)}: rows of their own)" if parts else ""
            runs = ("runs only through its own generate() over the sub-models it builds" if "generate" in vars(cls)
                    else "has nothing a check can call")
            return f"{NO_FORWARD}; the class {runs}{rows}"
        subclasses = subclasses_of(cls)
        models = f"; its subclasses {_names(subclasses)} are the models" if subclasses else ""
        return f"not a standalone model: a base class with {NO_FORWARD}, in no auto mapping{models}"
    if mapped:
        return ""
    builders = builders_of(cls)
    if builders:
        return (f"not a standalone model: an internal sub-module, built only inside {_names(builders)} "
                "(in no auto mapping)")
    return ""


# --------------------------------------------------------------------------- indexes


def by_name() -> dict[str, ModelInfo]:
    """Discovered classes by canonical name and by alias."""
    index = {}
    for info in discover():
        index[info.name] = info
        for alias in info.aliases:
            index[alias] = info
    return index


def class_index() -> dict[str, str]:
    """Every accepted row name -> its canonical name: class names and aliases, and for a profile row its name,
    its profile's name and its checkpoint id (``--models llava-interleave``, ``--models llava-hf/*``)."""
    index = {name: info.name for name, info in by_name().items()}
    for info in discover():
        if info.profile is not None:
            index.setdefault(info.profile.name, info.name)
            index.setdefault(info.profile.checkpoint, info.name)
    return index


def row_metadata(names) -> dict[str, dict]:
    """The envelope's row metadata of discovered classes (unknown names are left out)."""
    index = by_name()
    rows = {}
    for name in names:
        info = index.get(name)
        if info is None:
            continue
        rows[info.name] = {
            **profile_metadata(info),
            "model_type": info.model_type,
            "modalities": list(info.modalities),
            "kind": info.kind,
            "tasks": list(info.tasks),
            "aliases": list(info.aliases),
            "declared": info.declared,
        }
    return rows


def profile_metadata(info: ModelInfo) -> dict:
    """A profile row's own metadata: its class, profile name, checkpoint id and sub-config model types (the page
    searches the checkpoint); nothing for a default row."""
    if info.profile is None:
        return {}
    return {"class": info.class_name, "profile": info.profile.name, "checkpoint": info.profile.checkpoint,
            "sub_configs": dict(info.profile.sub_configs)}


def model_types() -> dict[str, str]:
    """Every discovered class's canonical name -> its model type (``llava``), as `select_classes` takes them."""
    return {info.name: info.model_type for info in discover()}


class NoMatch(LookupError):
    """A --models name that selects no class: `pattern`, and `close`, the nearest names that do (maybe none)."""

    def __init__(self, pattern: str, close: tuple[str, ...] = ()):
        super().__init__(pattern)
        self.pattern, self.close = pattern, tuple(close)

    def __str__(self) -> str:
        hint = (f"did you mean {', '.join(self.close)}?" if self.close
                else "see `conformance list` for the names")
        return f"no discovered class matches {self.pattern!r}; {hint}"


def select_classes(patterns: list[str], index: dict[str, str], names: list[str],
                   types: dict[str, str] | None = None) -> list[str]:
    """The names of `names` (in their order) that `patterns` select: the one resolver of class names.

    A pattern is a row name (a class name or alias: the class's default row;
    ``<ClassName>:<profile>``, a profile's name or its checkpoint id: that
    profile's row), a model type (`types`: canonical name -> ``model_type``,
    e.g. ``llava``: every row of that type, profiles included) or a glob over
    any of them (``*Llava*``, ``llava-hf/*``), all case-insensitive. `index` maps every accepted name to
    its canonical name; no patterns means all of `names`. A pattern that
    selects nothing raises `NoMatch` (a LookupError) naming it and the
    nearest names (`suggest`). ``:ci`` stands for the gate version's CI
    classes (`versions.gate_ci_models`: fixtures/versions.toml's ``[ci]
    gate``), each of which must be discovered; an unknown ``:name`` raises
    LookupError naming the known ones.
    """
    if not patterns:
        return list(names)
    chosen = set()
    for pattern in _expanded(patterns):
        hits = matching(pattern, index, types or {})
        if not hits:
            raise NoMatch(pattern, suggest(pattern, index, types or {}))
        chosen |= hits
    return [n for n in names if n in chosen]


def matching(pattern: str, index: dict[str, str], types: dict[str, str]) -> set[str]:
    """The canonical names `pattern` selects (see `select_classes`), maybe none."""
    import fnmatch

    wanted = pattern.lower()
    hits = {canonical for name, canonical in index.items() if fnmatch.fnmatchcase(name.lower(), wanted)}
    return hits | {name for name, model_type in types.items()
                   if model_type and name in index and fnmatch.fnmatchcase(model_type.lower(), wanted)}


def suggest(pattern: str, index: dict[str, str], types: dict[str, str], n: int = 3) -> tuple[str, ...]:
    """The names nearest to `pattern` (`difflib.get_close_matches`, case-insensitive) over the class names and
    model types; a class name is also compared without its ``ForConditionalGeneration`` ending, so that
    ``Lava`` finds LlavaForConditionalGeneration. Each is written as a name `select_classes` accepts."""
    import difflib

    spelled: dict[str, str] = {}  # lower-case candidate -> the selectable name it stands for
    for name in index:
        spelled.setdefault(name.lower(), name)
        stem = name.removesuffix("ForConditionalGeneration")
        spelled.setdefault(stem.lower(), name)
    for model_type in types.values():
        if model_type:
            spelled.setdefault(model_type.lower(), model_type)
    close = difflib.get_close_matches(pattern.lower(), list(spelled), n=n * 2)
    return tuple(dict.fromkeys(spelled[c] for c in close))[:n]


SELECTIONS = (":ci",)


def _expanded(patterns: list[str]) -> list[str]:
    """`patterns` with each named selection (``:ci``) replaced by its class names; an unknown ``:name`` raises
    LookupError naming it."""
    from conformance import versions

    found = []
    for pattern in patterns:
        if pattern == ":ci":
            found += versions.gate_ci_models()
        elif pattern.startswith(":"):
            raise LookupError(f"{pattern} (the named selections are {', '.join(SELECTIONS)})")
        else:
            found.append(pattern)
    return found
