"""Reading a model's config: its text config, the config of its vocabulary, its placeholder ids.

Contracts:

* `text_config(config)` is the decoder's text config as transformers
  resolves it (``get_text_config(decoder=True)``; on versions without the
  `decoder` keyword, ``get_text_config()``): what a cache for the decoder
  is sized from.
* `vocabulary_config(config)` is the config that owns the token vocabulary:
  the decoder text config when it has a `vocab_size`, else the first
  sub-config that has one (a sub-config named `decoder` first).
* `first_value(configs, names)` is the first attribute of `names` set (not
  None) on the first of `configs` that sets any; `first_int(configs, names,
  minimum)` the first that is an int (not a bool) of at least `minimum`,
  None when there is none.
* `with_sub_configs(config)` is `config` and, breadth first, every
  sub-config nested in it.
* `is_encoder_decoder(config)` is whether the model's language part is an
  encoder-decoder: the config says so, or its text config (or vocabulary
  config) does (InstructBLIP on Flan-T5: its own config does not say it).
* `placeholder_id(config, names, attribute)` is the media placeholder token
  id the model scatters features into: `attribute` when a fixture names it,
  else the first int among `names` on the config or its vocabulary config;
  None when there is none.
"""

from __future__ import annotations

from typing import Any

IMAGE_PLACEHOLDERS = ("image_token_id", "image_token_index", "image_token")
VIDEO_PLACEHOLDERS = ("video_token_id", "video_token_index")


def text_config(config):
    try:
        return config.get_text_config(decoder=True)
    except TypeError:
        return config.get_text_config()


def vocabulary_config(config):
    text = None
    for kwargs in ({"decoder": True}, {}):
        try:
            text = config.get_text_config(**kwargs)
            break
        except (TypeError, ValueError):  # no `decoder` kwarg (4.x), or ambiguous
            continue
    if text is not None and getattr(text, "vocab_size", None):
        return text
    subs = [v for v in vars(config).values() if hasattr(v, "to_dict") and getattr(v, "vocab_size", None)]
    named = [v for k, v in vars(config).items() if k == "decoder" and v in subs]
    return (named or subs or [text or config])[0]


def is_encoder_decoder(config) -> bool:
    return any(bool(getattr(cfg, "is_encoder_decoder", False))
               for cfg in (config, text_config(config), vocabulary_config(config)))


def first_value(configs, names: tuple[str, ...]) -> Any:
    for cfg in configs:
        if cfg is None:
            continue
        for name in names:
            value = getattr(cfg, name, None)
            if value is not None:
                return value
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def first_int(configs, names: tuple[str, ...], minimum: int = 0) -> int | None:
    for cfg in configs:
        for name in names:
            value = getattr(cfg, name, None)
            if _is_int(value) and value >= minimum:
                return value
    return None


def with_sub_configs(config) -> list:
    found, queue = [], [config]
    while queue:
        node = queue.pop(0)
        found.append(node)
        queue.extend(v for v in vars(node).values() if hasattr(v, "to_dict") and hasattr(v, "model_type"))
    return found


def placeholder_id(config, names: tuple[str, ...] = IMAGE_PLACEHOLDERS, attribute: str | None = None) -> int | None:
    names = (attribute,) if attribute else names
    for cfg in (config, vocabulary_config(config)):
        for name in names:
            value = getattr(cfg, name, None)
            if _is_int(value):
                return value
    return None
