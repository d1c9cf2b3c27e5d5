"""Build a model type's real processor locally, sized for its tiny model.

Contract of `build_processor(config, model_type, spec, hw, text_config)`: the
processor class transformers maps `model_type` to, for images of size `hw`,
made from

* a tokenizer built here with the `tokenizers` library (`local_tokenizer`):
  a WordLevel vocabulary of ``vocab_size`` ids, whitespace-split words
  ``w<id>`` for every ordinary id, and named special tokens for every token
  id the tiny config names (``image_token_index`` -> ``image_token``,
  ``boi_token_index`` -> ``boi_token``, ``bos_token_id`` -> ``bos_token``
  ...) at exactly the ids the tiny config holds (the shrinker remapped them;
  they are read, never typed). A token string the processor's ``__init__``
  names (``image_break_token="[IMG_BREAK]"``) keeps that string, at the
  config's id when the config names it, else at a free id; a token the
  processor asks the tokenizer for (``tokenizer.boi_token``) that the config
  does not name gets a free id too;
* the image processor (and video processor, where the processor has one)
  from its class defaults, with every size it uses set from the tiny config:
  ``size``/``crop_size`` to the tiny image size (``min_pixels`` and
  ``max_pixels``, there or as attributes, to its area), ``patch_size``,
  ``merge_size``, ``temporal_patch_size``, ``image_grid_pinpoints`` from the
  config attribute of that name (``merge_size`` also from
  ``spatial_merge_size``);
* the processor's own ``__init__`` kwargs that share a name with a config
  attribute (``patch_size``, ``vision_feature_select_strategy``, ...).

What is not generic is data, ``[samples.processor]`` of the model's fixture
(`ProcessorSpec`): ``kwargs`` (processor kwargs) and ``image`` (image and
video processor attributes) map a name to a value: a string
``"config.<dotted path>"`` names an attribute of the tiny config
(``"config.text_config.num_image_tokens"``), anything else is literal;
``prompt`` is the text that stands for one image in a prompt, with
``{name}`` replaced by the tokenizer's special token of that name (default
``"{image_token}"``, the processor's own image token); ``image_size``
(``[h, w]``) is the size of the sample images before processing (default:
the tiny image size); ``tokens`` gives a special token (by the processor's
name for it, ``img_patch_token``) its id (a config reference or an int)
where the generic naming pairs them wrongly (a config token id claimed
there leaves its generic name, which gets a free id).

transformers 4.x differs in three ways, handled by feature, not by version:
its processors list their parts in the ``attributes`` class list (5.x:
``get_attributes()``); a processor may check the tokenizer's class against its
``tokenizer_class`` (PaliGemma wants a ``GemmaTokenizerFast``): the same local
tokenizer is then built as that fast class; and a model type the image
processor auto mapping lacks (``emu3``) uses the concrete class its processor
declares (``image_processor_class``; an ``AutoImageProcessor`` there needs a
checkpoint and is unavailable). A fixture kwarg the processor's ``__init__``
does not name (4.57's JanusProcessor hard-codes 576 image tokens) cannot size
the processor: `ProcessorUnavailable`.

No hub, no files: nothing is downloaded or read from disk. Every failure
raises `ProcessorUnavailable` with a one-line reason.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any

from conformance.cases.configs import first_value

# A config attribute naming a token id, and the tokenizer's name for that token.
TOKEN_ATTR = re.compile(r"^(?P<name>\w+_token)(_id|_index)$")
STANDARD_TOKENS = ("bos_token", "eos_token", "pad_token", "unk_token")
# Image/video processor attributes set from a config attribute of one of these names.
SIZE_ATTRS = {
    "patch_size": ("patch_size",),
    "merge_size": ("merge_size", "spatial_merge_size"),
    "temporal_patch_size": ("temporal_patch_size",),
    "image_grid_pinpoints": ("image_grid_pinpoints",),
}
SIZE_TABLES = ("size", "crop_size", "max_image_size")
PIXEL_COUNTS = ("min_pixels", "max_pixels")  # image areas: the tiny image's area


class ProcessorUnavailable(RuntimeError):
    """The model type's processor cannot be built locally; the message says why, in one line."""


@dataclass(frozen=True)
class ProcessorSpec:
    """`[samples.processor]` of a model fixture (see the module docstring)."""

    kwargs: dict[str, Any] = field(default_factory=dict)
    image: dict[str, Any] = field(default_factory=dict)
    prompt: str = "{image_token}"
    image_size: tuple[int, int] | None = None  # the sample images' size before processing (default: tiny size)
    tokens: dict[str, Any] = field(default_factory=dict)  # token name -> its id (config reference or literal)

    @classmethod
    def from_recipe(cls, recipe: dict[str, Any]) -> "ProcessorSpec":
        table = dict(recipe.get("processor", {}))
        size = table.get("image_size")
        if isinstance(size, int):
            size = (size, size)
        return cls(kwargs=dict(table.get("kwargs", {})), image=dict(table.get("image", {})),
                   prompt=table.get("prompt", "{image_token}"), image_size=tuple(size) if size else None,
                   tokens=dict(table.get("tokens", {})))


def config_value(config, dotted: str) -> Any:
    """The value of `dotted` (``"text_config.num_image_tokens"``) on `config`; AttributeError if unset."""
    value = config
    for part in dotted.split("."):
        value = getattr(value, part)
    if value is None:
        raise AttributeError(f"config attribute {dotted!r} is None")
    return value


CONFIG_REF = "config."


def _resolve(config, value: Any) -> Any:
    """A fixture value: ``"config.<path>"`` names a config attribute, anything else is literal."""
    if not (isinstance(value, str) and value.startswith(CONFIG_REF)):
        return value
    try:
        return config_value(config, value[len(CONFIG_REF):])
    except AttributeError:
        raise ProcessorUnavailable(f"[samples.processor] names {value!r}, which the tiny config does not set; "
                                   "name an attribute of the config") from None


# --- tokenizer ----------------------------------------------------------------------------------

def token_ids(config, text_config) -> dict[str, int]:
    """Special token name -> id, for every token id the top or text config names."""
    found: dict[str, int] = {}
    for cfg in (config, text_config):
        for key, value in sorted(cfg.to_dict().items()):
            match = TOKEN_ATTR.match(key)
            if match and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                found.setdefault(match["name"], value)
    return found


def processor_token_strings(processor_class) -> dict[str, str]:
    """Token strings the processor's ``__init__`` names by default (``image_token="<image>"``)."""
    try:
        params = inspect.signature(processor_class.__init__).parameters
    except (TypeError, ValueError):
        return {}
    return {name: p.default for name, p in params.items()
            if name.endswith("_token") and isinstance(p.default, str) and p.default}


def default_token_string(name: str) -> str:
    """``image_token`` -> ``<image>``: the common spelling, which processors that hard-code a string use."""
    return f"<{name.removesuffix('_token')}>"


def local_tokenizer(vocab_size: int, ids: dict[str, int], strings: dict[str, str] | None = None,
                    added: tuple[str, ...] = (), tokenizer_class=None):
    """A `PreTrainedTokenizerFast` (or `tokenizer_class`, its subclass) over `vocab_size` ids, special tokens at `ids`.

    `ids` maps a token name (``image_token``) to its id; `strings` gives the
    token strings a processor expects (default `default_token_string`). Names in
    `strings` without an id, an unknown-word token the config does not name,
    and the `added` token strings (tokens a processor adds to its tokenizer)
    get free ids from the top of the vocabulary. Ordinary ids are words
    ``w<id>``; padding is on the left (the pad token, if the config names
    none, takes the lowest free id).
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    strings = dict(strings or {})
    ids = dict(ids)
    bad = [name for name, i in ids.items() if not 0 <= i < vocab_size]
    if bad:
        raise ProcessorUnavailable(f"{bad[0]} id {ids[bad[0]]} is outside the tiny vocabulary of {vocab_size}")
    used = set(ids.values())

    def free_id(what: str, ascending: bool = False) -> int:
        order = range(vocab_size) if ascending else range(vocab_size - 1, -1, -1)
        found = next((i for i in order if i not in used), None)
        if found is None:
            raise ProcessorUnavailable(f"no free id in a {vocab_size}-token vocabulary for {what}")
        used.add(found)
        return found

    for name in [*strings, "unk_token"]:
        if name not in ids:
            ids[name] = free_id(name)
    if "pad_token" not in ids:
        ids["pad_token"] = free_id("pad_token", ascending=True)
    text = {name: strings.get(name, default_token_string(name)) for name in ids}
    extra_strings = [t for t in added if t not in text.values()]
    vocab = {text[name]: i for name, i in ids.items()}
    vocab.update({t: free_id(t) for t in extra_strings})
    vocab.update({f"w{i}": i for i in range(vocab_size) if i not in used})
    backend = Tokenizer(models.WordLevel(vocab, unk_token=text["unk_token"]))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    standard = {name: text[name] for name in STANDARD_TOKENS if name in text}
    extra = {name: text[name] for name in ids if name not in STANDARD_TOKENS}
    tokenizer = (tokenizer_class or PreTrainedTokenizerFast)(tokenizer_object=backend, padding_side="left",
                                                             extra_special_tokens=extra, **standard)
    if extra_strings:
        tokenizer.add_special_tokens({"additional_special_tokens": extra_strings})
    return tokenizer


# --- image / video processors --------------------------------------------------------------------

def _tiny_sizes(hw: tuple[int, int]) -> dict[str, int]:
    """Size values by their name: edges in pixels, ``*_pixels`` as an area."""
    h, w = hw
    return {"height": h, "width": w, "shortest_edge": min(h, w), "longest_edge": max(h, w),
            "min_pixels": h * w, "max_pixels": h * w}


def _tiny_size_table(table: dict, hw: tuple[int, int]) -> dict:
    sizes = _tiny_sizes(hw)
    return {key: sizes.get(key, value) for key, value in table.items()}


def _sized_like(default: Any, value: Any) -> Any:
    """`value` in the shape of `default` (an int patch size as ``{"height", "width"}`` where the default is a dict)."""
    if isinstance(default, dict) and isinstance(value, int):
        return {key: value for key in default}
    if isinstance(value, (list, tuple)) and isinstance(default, int):
        return int(value[0])
    return value


def tiny_media_processor(cls, config, hw: tuple[int, int], overrides: dict[str, Any]):
    """`cls()` (an image or video processor) with its sizes set from the tiny config, then `overrides`."""
    try:
        defaults = cls().to_dict()
    except Exception as exc:
        raise ProcessorUnavailable(f"{cls.__name__}() cannot be built from its defaults: {_line(exc)}") from None
    vision = getattr(config, "vision_config", None)
    configs = [c for c in (vision, config) if c is not None]
    kwargs: dict[str, Any] = {}
    for attr in SIZE_TABLES:
        if isinstance(defaults.get(attr), dict):
            kwargs[attr] = _tiny_size_table(defaults[attr], hw)
    for attr in PIXEL_COUNTS:
        if isinstance(defaults.get(attr), int):
            kwargs[attr] = _tiny_sizes(hw)[attr]
    for attr, names in SIZE_ATTRS.items():
        value = first_value(configs, names)
        if attr in defaults and value is not None:
            kwargs[attr] = _sized_like(defaults[attr], value)
    kwargs.update({key: _resolve(config, value) for key, value in overrides.items()})
    try:
        built = cls(**{k: v for k, v in kwargs.items() if k in defaults})
    except Exception as exc:
        raise ProcessorUnavailable(f"{cls.__name__}(**tiny sizes) failed: {_line(exc)}") from None
    for key, value in kwargs.items():  # attributes the class does not take as kwargs (image_seq_length)
        if key not in defaults:
            setattr(built, key, value)
    return built


def _media_class(mapping_names: dict, model_type: str, kind: str, declared: Any = None):
    """The image/video processor class transformers maps `model_type` to; without a mapping, the concrete class a
    4.x processor declares (``image_processor_class = "Emu3ImageProcessor"``; ``Auto*`` names no class)."""
    import importlib.util

    import transformers

    entry = mapping_names.get(model_type)
    if entry is None:
        names = [n for n in (declared if isinstance(declared, (list, tuple)) else [declared])
                 if isinstance(n, str) and not n.startswith("Auto")]
        entry = names or None
    if entry is None:
        return None
    if isinstance(entry, dict):
        backends = ["pil"] + (["torchvision"] if importlib.util.find_spec("torchvision") else [])
        names = [entry.get(b) for b in backends if entry.get(b)]
    else:
        names = [n for n in (entry if isinstance(entry, (list, tuple)) else [entry]) if n]
    for name in names:
        cls = getattr(transformers, name, None)
        if cls is not None:
            return cls
    raise ProcessorUnavailable(f"the {kind} processor of {model_type} ({entry}) needs torchvision, "
                               "which is not installed")


# --- the processor ---------------------------------------------------------------------------------

def processor_class(model_type: str):
    import transformers
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    name = PROCESSOR_MAPPING_NAMES.get(model_type)
    cls = getattr(transformers, name, None) if name else None
    if cls is None:
        raise ProcessorUnavailable(f"transformers maps no processor class to model_type {model_type!r}")
    return cls


def build_processor(config, model_type: str, spec: ProcessorSpec, hw: tuple[int, int], text_config=None,
                    added: tuple[str, ...] = ()):
    """The processor of `model_type` for the tiny `config` (module docstring); `hw` is the image size,
    `added` token strings the processor adds to its tokenizer, to be placed inside the vocabulary."""
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES

    text_config = text_config if text_config is not None else config
    cls = processor_class(model_type)
    try:
        # transformers 5 lists a processor's parts with get_attributes(); 4.x with the `attributes` class list.
        attributes = cls.get_attributes() if hasattr(cls, "get_attributes") else list(cls.attributes)
        strings = processor_token_strings(cls)
    except ImportError as exc:  # a dummy class: a backend is missing
        raise ProcessorUnavailable(f"{cls.__name__} cannot be used here: {_line(exc)}") from None
    parts: dict[str, Any] = {}
    ids = token_ids(config, text_config)
    claimed = {name: int(_resolve(config, value)) for name, value in spec.tokens.items()}
    ids = {name: i for name, i in ids.items() if i not in claimed.values()}
    ids.update(claimed)
    for attribute in attributes:
        if attribute == "tokenizer":
            continue
        elif attribute == "image_processor":
            image_cls = _media_class(IMAGE_PROCESSOR_MAPPING_NAMES, model_type, "image",
                                     getattr(cls, "image_processor_class", None))
            if image_cls is None:
                raise ProcessorUnavailable(f"transformers maps no image processor to model_type {model_type!r}")
            parts[attribute] = tiny_media_processor(image_cls, config, hw, spec.image)
        elif attribute == "video_processor":
            parts[attribute] = _video_processor(model_type, config, hw, spec)
        else:
            raise ProcessorUnavailable(f"{cls.__name__} needs a {attribute}, which is not built locally")
    params = inspect.signature(cls.__init__).parameters
    vision = getattr(config, "vision_config", None)
    configs = [c for c in (config, vision, text_config) if c is not None]
    kwargs = {name: value for name in params if name not in attributes and name not in strings
              and (value := first_value(configs, (name,))) is not None}
    ignored = [name for name in spec.kwargs if name not in params]
    if ignored:  # swallowed by **kwargs: the processor keeps its own value (4.57's JanusProcessor: 576 tokens)
        raise ProcessorUnavailable(f"{cls.__name__}.__init__ takes no {ignored[0]!r}: the processor cannot be sized "
                                   "as [samples.processor] kwargs say")
    kwargs.update({name: _resolve(config, value) for name, value in spec.kwargs.items()})
    tokenizer_class = None
    for _ in range(MAX_MISSING_TOKENS + 2):
        tokenizer = local_tokenizer(int(text_config.vocab_size), ids, strings, added, tokenizer_class)
        try:
            return cls(**parts, tokenizer=tokenizer, **kwargs)
        except Exception as exc:
            wanted = _checked_tokenizer_class(cls, exc) if tokenizer_class is None else None
            if wanted is not None:  # a 4.x processor checks the tokenizer's class: the same tokenizer, of that class
                tokenizer_class = wanted
                continue
            missing = _missing_token(exc)
            if missing is None or missing in strings:
                raise ProcessorUnavailable(f"{cls.__name__}(...) failed: {_line(exc)}") from None
            strings[missing] = default_token_string(missing)  # the processor reads it, the config does not name it
    raise ProcessorUnavailable(f"{cls.__name__} asks for more than {MAX_MISSING_TOKENS} tokens "
                               "the config does not name")


def _checked_tokenizer_class(processor_class, exc: Exception):
    """The fast tokenizer class a processor's class check asked for, or None.

    transformers 4.x processors check the tokenizer against their
    ``tokenizer_class`` (``("GemmaTokenizer", "GemmaTokenizerFast")``) in
    ``ProcessorMixin.check_argument_for_proper_class`` and reject a plain
    `PreTrainedTokenizerFast` with a TypeError; an ``AutoTokenizer`` there
    accepts any tokenizer. The fast class of that name takes the same local
    tokenizer object.
    """
    import transformers

    if not (isinstance(exc, TypeError) and "for argument tokenizer" in str(exc)):
        return None
    declared = getattr(processor_class, "tokenizer_class", None)
    names = declared if isinstance(declared, (list, tuple)) else [declared]
    for name in names:
        if isinstance(name, str) and name.endswith("Fast") and not name.startswith("Auto"):
            found = getattr(transformers, name, None)
            if isinstance(found, type) and issubclass(found, transformers.PreTrainedTokenizerFast):
                return found
    return None


MISSING_TOKEN = re.compile(r"(?:attribute|token) '?(?P<name>\w+_token)(?:_id)?'?")
MAX_MISSING_TOKENS = 8


def _missing_token(exc: Exception) -> str | None:
    """The special token a processor's ``__init__`` asked the tokenizer for and did not find."""
    if not isinstance(exc, (AttributeError, ValueError, KeyError)):
        return None
    match = MISSING_TOKEN.search(str(exc))
    return match["name"] if match else None


def _video_processor(model_type: str, config, hw, spec: ProcessorSpec):
    """The model type's video processor (transformers' video processors need torchvision)."""
    from transformers.models.auto.video_processing_auto import VIDEO_PROCESSOR_MAPPING_NAMES

    video_cls = _media_class(VIDEO_PROCESSOR_MAPPING_NAMES, model_type, "video")
    if video_cls is None:
        raise ProcessorUnavailable(f"transformers maps no video processor to model_type {model_type!r}")
    return tiny_media_processor(video_cls, config, hw, spec.image)


def image_marker(processor, spec: ProcessorSpec) -> str:
    """The text that stands for one image in a prompt (`ProcessorSpec.prompt` filled in)."""
    tokenizer = processor.tokenizer
    names = {"image_token": getattr(processor, "image_token", None) or getattr(tokenizer, "image_token", None)}

    def token(match: re.Match) -> str:
        name = match[1]
        value = names.get(name) or getattr(tokenizer, name, None)
        if not isinstance(value, str):
            raise ProcessorUnavailable(f"[samples.processor] prompt names token {{{name}}}, which the tokenizer "
                                       "does not have; name a special token of the config (e.g. image_token)")
        return value

    return re.sub(r"\{(\w+)\}", token, spec.prompt)


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300]
